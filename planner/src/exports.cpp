#include "actmem/exports.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/simulator.h"
#include "solver_model.h"

namespace actmem {
namespace {

// One knob setting of a trainer: its keys and the plan they mean.
struct Candidate {
  nlohmann::json keys;
  Plan plan;
};

nlohmann::json predicted(const Report& r) {
  return nlohmann::json{{"peak_bytes", r.peak_bytes},
                        {"step_time_s", r.step_time_s},
                        {"fits", r.fits},
                        {"recompute_overhead", r.recompute_overhead()}};
}

// The fastest candidate that fits, else the one with the least peak; marks
// it exact when it is the plan itself. Candidates are ranked by the
// solver's composition of stage replays (exact: tests/solver_test.cpp
// checks it against simulate() plan by plan), which is far cheaper than
// simulating each; the figures reported are simulate()'s for the choice.
nlohmann::json best_expressible(detail::ChainModel& model, const CostGraph& g, const Device& d, std::int64_t budget,
                                const Plan& plan, const std::vector<Candidate>& candidates, const std::string& note) {
  // Of equally fast ones (times equal up to summation order), the least peak.
  auto faster = [](const detail::ChainModel::Prediction& x, const detail::ChainModel::Prediction& y) {
    if (std::abs(x.recompute_s - y.recompute_s) > 1e-12 * std::max(x.recompute_s, y.recompute_s))
      return x.recompute_s < y.recompute_s;
    return x.peak_bytes < y.peak_bytes;
  };
  std::optional<std::size_t> best;
  detail::ChainModel::Prediction best_prediction;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const detail::ChainModel::Prediction p = model.predict(candidates[i].plan);
    const bool fits = p.peak_bytes <= budget, best_fits = best_prediction.peak_bytes <= budget;
    const bool better = !best || (fits && !best_fits) || (fits && best_fits && faster(p, best_prediction)) ||
                        (!fits && !best_fits && p.peak_bytes < best_prediction.peak_bytes);
    if (better) {
      best = i;
      best_prediction = p;
    }
  }
  nlohmann::json out = candidates[*best].keys;
  out["exact"] = candidates[*best].plan == plan;
  out["predicted"] = predicted(simulate(g, d, budget, candidates[*best].plan));
  out["note"] = note;
  return out;
}

int processor_steps(const CostGraph& g) { return static_cast<int>(g.model().processor_steps); }
int first_processor() { return 2; }
int decoder_stage(const CostGraph& g) { return static_cast<int>(g.stages().size()) - 1; }

// Processor steps [first, last) in regions of `size` steps.
void processor_regions(Plan& p, int first, int last, int size) {
  for (int s = first; s < last; s += size) p.checkpoints.push_back({s, std::min(last, s + size) - 1, {}});
}

std::vector<std::int64_t> powers_of_two_up_to(std::int64_t limit) {
  std::vector<std::int64_t> v;
  for (std::int64_t b = 1; b <= limit && b <= 1024; b *= 2) v.push_back(b);
  return v;
}

std::vector<int> divisors(int n) {
  std::vector<int> v;
  for (int k = 1; k <= n; ++k)
    if (n % k == 0) v.push_back(k);
  return v;
}

// PhysicsNeMo GraphCastNet: checkpoint_encoder covers the embedders, the
// encoder and the first processor layer; checkpoint_decoder the last
// processor layer, the decoder and the output MLP; checkpoint_processor
// (segments) the inner L − 2 layers as 2 × (L − 2) modules (edge block, node
// block), so segments must divide 2 × (L − 2). actmem's stages are whole
// layers, so only segment sizes of whole layers (an even number of modules)
// are offered. No edge blocking.
std::vector<Candidate> physicsnemo_candidates(const CostGraph& g) {
  const int L = processor_steps(g);
  const int dec = decoder_stage(g);
  std::vector<Candidate> out;
  for (int enc = 0; enc <= 1; ++enc) {
    for (int decd = 0; decd <= 1; ++decd) {
      std::vector<int> segment_options{0};
      if (L > 2)
        for (int s : divisors(2 * (L - 2)))
          if ((2 * (L - 2) / s) % 2 == 0) segment_options.push_back(s);
      for (int segments : segment_options) {
        Plan p = empty_plan(g.stages());
        if (L < 2 && (enc || decd)) continue;
        if (enc) p.checkpoints.push_back({0, first_processor(), {}});
        if (segments > 0) processor_regions(p, first_processor() + 1, dec - 1, (L - 2) / segments);
        if (decd) p.checkpoints.push_back({dec - 1, dec, {}});
        nlohmann::json keys{{"checkpoint_encoder", enc == 1},
                            {"checkpoint_decoder", decd == 1},
                            {"checkpoint_processor", segments > 0},
                            {"segments", segments > 0 ? segments : 1}};
        out.push_back({keys, std::move(p)});
      }
    }
  }
  return out;
}

// anemoi: the processor in num_chunks checkpointed chunks (num_chunks divides
// num_layers); the encoder and decoder each checkpointed whole with their
// edges in num_chunks chunks (anemoi balances decoder chunks by destination
// nodes; actmem models equal edge counts).
std::vector<Candidate> anemoi_candidates(const CostGraph& g, const std::vector<std::int64_t>& edges) {
  const int L = processor_steps(g);
  const int dec = decoder_stage(g);
  std::vector<Candidate> out;
  for (std::int64_t enc_chunks : powers_of_two_up_to(edges.front())) {
    for (std::int64_t dec_chunks : powers_of_two_up_to(edges.back())) {
      for (int chunks : divisors(L)) {
        for (int checkpointing = 0; checkpointing <= 1; ++checkpointing) {
          Plan p = empty_plan(g.stages());
          if (checkpointing) {
            p.checkpoints.push_back({0, 0, {}});
            processor_regions(p, first_processor(), dec, L / chunks);
            p.checkpoints.push_back({dec, dec, {}});
          }
          p.edge_blocks.front() = enc_chunks;
          p.edge_blocks.back() = dec_chunks;
          nlohmann::json keys{{"model.encoder.num_chunks", enc_chunks},
                              {"model.processor.num_chunks", chunks},
                              {"model.decoder.num_chunks", dec_chunks},
                              {"gradient_checkpointing", checkpointing == 1}};
          out.push_back({keys, std::move(p)});
        }
      }
    }
  }
  return out;
}

// DeepMind's newer code: processor steps rematerialised in blocks of
// remat_block_size, the grid2mesh GNN rematerialised whole when
// remat_grid_to_mesh_gnn, and encoder/decoder edge updates in blocks of
// edge_update_remat_block_size edges (the mesh2grid GNN rematerialised whole
// whenever edge blocks are used, as in the paper's training setup).
std::vector<Candidate> deepmind_candidates(const CostGraph& g, const std::vector<std::int64_t>& edges) {
  const int L = processor_steps(g);
  const int dec = decoder_stage(g);
  std::vector<Candidate> out;
  for (int block = 0; block <= L; ++block) {
    for (int remat_g2m = 0; remat_g2m <= 1; ++remat_g2m) {
      for (std::int64_t blocks : powers_of_two_up_to(edges.back())) {
        Plan p = empty_plan(g.stages());
        if (remat_g2m) p.checkpoints.push_back({0, 0, {}});
        if (block > 0) processor_regions(p, first_processor(), dec, block);
        const std::int64_t edges_per_block = (edges.back() + blocks - 1) / blocks;
        if (blocks > 1) {
          p.checkpoints.push_back({dec, dec, {}});
          p.edge_blocks.back() = blocks;
          p.edge_blocks.front() = std::min(edges.front(), (edges.front() + edges_per_block - 1) / edges_per_block);
        }
        nlohmann::json keys{{"remat_block_size", block},
                            {"remat_grid_to_mesh_gnn", remat_g2m == 1},
                            {"edge_update_remat_block_size", blocks > 1 ? nlohmann::json(edges_per_block) : nlohmann::json()}};
        out.push_back({keys, std::move(p)});
      }
    }
  }
  return out;
}

}  // namespace

nlohmann::json trainer_exports(const CostGraph& g, const Device& d, std::int64_t budget, const Plan& plan,
                               const Report& report) {
  const std::vector<std::int64_t> edges = edges_per_stage(g);
  nlohmann::json exports;

  nlohmann::json pytorch = plan_to_json(plan, g.stages());
  pytorch["function"] = "torch.utils.checkpoint.checkpoint";
  pytorch["use_reentrant"] = false;
  pytorch["exact"] = true;
  pytorch["predicted"] = predicted(report);
  pytorch["note"] = "each region (and each edge block) runs under one checkpoint call; integrations/pytorch applies this";
  exports["pytorch"] = pytorch;

  nlohmann::json jax = plan_to_json(plan, g.stages());
  jax["function"] = "jax.checkpoint";
  jax["policy"] = "jax.checkpoint_policies.nothing_saveable";
  jax["exact"] = true;
  jax["predicted"] = predicted(report);
  jax["note"] = "wrap each region's stages, and each edge block, in jax.checkpoint with the policy";
  exports["jax"] = jax;

  detail::ChainModel model(g, d);
  exports["physicsnemo"] = best_expressible(model, g, d, budget, plan, physicsnemo_candidates(g),
                                            "segments counts modules (edge and node blocks); no edge blocking");
  exports["anemoi"] = best_expressible(model, g, d, budget, plan, anemoi_candidates(g, edges),
                                       "num_chunks for the processor must divide num_layers; mapper chunks "
                                       "modelled as equal edge blocks");
  exports["deepmind"] = best_expressible(model, g, d, budget, plan, deepmind_candidates(g, edges),
                                         "graphcast.py remat knobs; decoder rematerialised whole when edges are blocked");
  return exports;
}

}  // namespace actmem

// DeepMind's knobs (google-deepmind/graphcast, now weathernext/;
// docs/trainer-exports.md).
//
// GraphCast (weathernext/weathernext1_graph/graphcast.py) has no remat knob
// of its own; its trainer's one knob is
// autoregressive.Predictor(gradient_checkpointing=True), which wraps each
// rollout step in hk.remat (weathernext/utils/autoregressive.py) and does
// nothing at rollout 1: actmem's step_checkpoint.
//
// DeepGNN (weathernext/utils/deep_gnn.py), the GNN of WeatherNext 2's grid-
// to-mesh and mesh-to-grid models, has per-GNN deep_gnn_kwargs:
// remat_block_size (message-passing steps per hk.remat block, None or 0:
// none) and edge_update_remat_block_size (edges per hk.remat block of the
// edge update, None: not blocked; typed_graph_net.py splits at multiples of
// it). WeatherNext 2's architecture (weathernext/weathernext2/
// architecture.py) wraps a whole GNN in remat with remat_grid_to_mesh_gnn,
// remat_mesh_gnn and remat_mesh_to_grid_gnn. For a GraphCast built of three
// DeepGNNs (grid to mesh, mesh with K steps, mesh to grid) these map to:
// the encoder one region; the processor in regions of remat_block_size
// steps (the mesh edge embedding before them, outside); each GNN's edge
// update in blocks. remat_mesh_gnn (one region around all the blocks) is
// left false.
#include <algorithm>

#include "plan/trainer_knobs.h"

namespace actmem::detail {

std::int64_t deepmind_edge_block_size(std::int64_t edges, std::int64_t blocks) {
  if (blocks <= 1 || blocks > edges) return 0;
  const std::int64_t size = (edges + blocks - 1) / blocks;
  return (edges + size - 1) / size == blocks ? size : 0;
}

std::vector<KnobSetting> deepmind_graphcast_settings(const CostGraph& g) {
  std::vector<KnobSetting> out;
  for (int on = 0; on <= 1; ++on) {
    Plan p = empty_plan(g.stages());
    // At rollout 1 DeepMind's predictor skips the remat ("Skipping gradient
    // checkpointing for sequence length of 1"), and so does actmem.
    p.step_checkpoint = on == 1 && g.run().rollout > 1;
    out.push_back({nlohmann::json{{"gradient_checkpointing", on == 1}}, std::move(p)});
  }
  return out;
}

namespace {

// Block counts DeepMind's splitting reproduces, as (blocks, edges per block).
std::vector<std::pair<std::int64_t, std::int64_t>> block_options(std::int64_t edges) {
  std::vector<std::pair<std::int64_t, std::int64_t>> v{{1, 0}};
  for (std::int64_t b = 2; b <= edges && b <= 1024; b *= 2)
    if (const std::int64_t size = deepmind_edge_block_size(edges, b); size > 0) v.push_back({b, size});
  return v;
}

nlohmann::json deep_gnn_kwargs(std::int64_t remat_block_size, std::int64_t edges_per_block) {
  return {{"remat_block_size", remat_block_size > 0 ? nlohmann::json(remat_block_size) : nlohmann::json()},
          {"edge_update_remat_block_size", edges_per_block > 0 ? nlohmann::json(edges_per_block) : nlohmann::json()}};
}

}  // namespace

std::vector<KnobSetting> deep_gnn_settings(const CostGraph& g, const std::vector<std::int64_t>& edges) {
  const int L = processor_steps(g);
  const int dec = decoder_stage(g);
  const auto encoder_blocks = block_options(edges.front());
  const auto decoder_blocks = block_options(edges.back());
  std::vector<KnobSetting> out;
  for (int remat_g2m = 0; remat_g2m <= 1; ++remat_g2m) {
    for (const auto& [enc_blocks, enc_size] : encoder_blocks) {
      for (int block = 0; block <= L; ++block) {
        for (int remat_m2g = 0; remat_m2g <= 1; ++remat_m2g) {
          for (const auto& [dec_blocks, dec_size] : decoder_blocks) {
            Plan p = empty_plan(g.stages());
            if (remat_g2m) p.checkpoints.push_back({0, 0, {}});
            for (int s = first_processor_stage(); block > 0 && s < dec; s += block)
              p.checkpoints.push_back({s, std::min(dec, s + block) - 1, {}});
            if (remat_m2g) p.checkpoints.push_back({dec, dec, {}});
            p.edge_blocks.front() = enc_blocks;
            p.edge_blocks.back() = dec_blocks;
            nlohmann::json c{{"remat_grid_to_mesh_gnn", remat_g2m == 1},
                             {"remat_mesh_gnn", false},
                             {"remat_mesh_to_grid_gnn", remat_m2g == 1},
                             {"points_to_mesh_model_ctor", {{"deep_gnn_kwargs", deep_gnn_kwargs(0, enc_size)}}},
                             {"mesh_model_ctor", {{"deep_gnn_kwargs", deep_gnn_kwargs(block, 0)}}},
                             {"mesh_to_grid_model_ctor", {{"deep_gnn_kwargs", deep_gnn_kwargs(0, dec_size)}}}};
            out.push_back({std::move(c), std::move(p)});
          }
        }
      }
    }
  }
  return out;
}

}  // namespace actmem::detail

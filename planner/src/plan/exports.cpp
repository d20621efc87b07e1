#include "actmem/plan/exports.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/simulate/simulator.h"
#include "plan/trainer_knobs.h"
#include "solve/solver_model.h"

namespace actmem {
namespace {

using detail::KnobSetting;

nlohmann::json predicted(const Report& r) {
  return nlohmann::json{{"peak_bytes", r.peak_bytes},
                        {"step_time_s", r.step_time_s},
                        {"fits", r.fits},
                        {"recompute_overhead", r.recompute_overhead()}};
}

// How a setting ranks: its peak and a time that orders settings of one
// trainer (the solver's added recomputation, or the simulated step time).
struct Score {
  std::int64_t peak_bytes = 0;
  double time_s = 0;
};
using Scorer = std::function<Score(const Plan&)>;

// The fastest setting that fits, else the one with the least peak (of equal
// times up to summation order, the least peak; of equal scores, the first).
// `exact` says whether the trainer runs the plan itself; `predicted` is
// simulate()'s report of the setting's plan on `g`, the trainer's own
// implementation of the model: what the trainer will do.
nlohmann::json best_setting(const Scorer& score, const CostGraph& g, const Device& d, std::int64_t budget,
                            const Plan& plan, const std::vector<KnobSetting>& settings) {
  auto faster = [](const Score& x, const Score& y) {
    if (std::abs(x.time_s - y.time_s) > 1e-12 * std::max(x.time_s, y.time_s)) return x.time_s < y.time_s;
    return x.peak_bytes < y.peak_bytes;
  };
  if (settings.empty()) throw std::logic_error("best_setting: a trainer without settings (unsupported_export)");
  std::optional<std::size_t> best;
  Score best_score;
  for (std::size_t i = 0; i < settings.size(); ++i) {
    const Score s = score(settings[i].plan);
    const bool fits = s.peak_bytes <= budget, best_fits = best_score.peak_bytes <= budget;
    const bool better = !best || (fits && !best_fits) || (fits && best_fits && faster(s, best_score)) ||
                        (!fits && !best_fits && s.peak_bytes < best_score.peak_bytes);
    if (better) {
      best = i;
      best_score = s;
    }
  }
  const KnobSetting& chosen = settings.at(*best);
  return nlohmann::json{{"config", chosen.config},
                        {"implementation", to_string(g.model().implementation)},
                        {"exact", chosen.plan == plan},
                        {"predicted", predicted(simulate(g, d, budget, chosen.plan))},
                        {"plan", plan_to_json(chosen.plan, g.stages())}};
}

// The plan exported as it is (PyTorch, JAX): the plan file's own keys.
nlohmann::json plan_export(const CostGraph& g, const Plan& plan, const Report& report) {
  const nlohmann::json keys = plan_to_json(plan, g.stages());
  return nlohmann::json{{"config", keys}, {"exact", true},    {"predicted", predicted(report)},
                        {"plan", keys},   {"format", "json"}, {"snippet", keys.dump(2) + "\n"}};
}

std::string physicsnemo_snippet(const nlohmann::json& config) {
  return "# examples/weather/graphcast/conf/config.yaml (or as Hydra overrides: key=value)\n" +
         detail::yaml_snippet(config);
}

std::string anemoi_snippet(const nlohmann::json& config) {
  return "# anemoi-training config (model=gnn): merge under the root of your config\n" + detail::yaml_snippet(config);
}

std::string deepmind_snippet(const nlohmann::json& config) {
  return fmt::format("predictor = autoregressive.Predictor(predictor, gradient_checkpointing={})\n",
                     config.at("gradient_checkpointing").get<bool>() ? "True" : "False");
}

std::string deep_gnn_snippet(const nlohmann::json& config) {
  nlohmann::json architecture, ctors;
  for (const auto& [key, value] : config.items()) (key.starts_with("remat_") ? architecture : ctors)[key] = value;
  std::string text = "# weathernext2 architecture kwargs (predictor_kwargs['noisy_function_kwargs'])\n" +
                     detail::python_snippet(architecture);
  text += "# deep_gnn_kwargs of each GNN's constructor (deep_gnn.DeepGNN)\n";
  for (const auto& [ctor, value] : ctors.items())
    text += fmt::format("{}_deep_gnn_kwargs = {}\n", ctor.substr(0, ctor.size() - std::string("_model_ctor").size()),
                        detail::python_literal(value.at("deep_gnn_kwargs")));
  return text;
}

// The step as a trainer's own code runs it: the user's model in the
// trainer's implementation (docs/trainer-exports.md). A PhysicsNeMo model
// keeps its concat_trick; any other model goes to PhysicsNeMo without it
// (the export then sets concat_trick: false).
CostGraph trainer_graph(const CostGraph& g, Implementation implementation) {
  ModelDescription m = g.model();
  if (m.implementation != implementation) {
    m.implementation = implementation;
    m.concat_trick = false;
  }
  return CostGraph::build(m, g.run());
}

// Ranks settings by the solver's chain model of `g` (exact peaks, the
// recomputation time), or by simulating each on `g`.
struct Scorers {
  explicit Scorers(const CostGraph& graph, const Device& d, std::int64_t budget)
      : g(graph),
        model(graph, d),
        by_chain([this](const Plan& p) {
          const detail::ChainModel::Prediction x = model.predict(p);
          return Score{x.peak_bytes, x.recompute_s};
        }),
        by_simulation([this, &d, budget](const Plan& p) {
          const Report r = simulate(g, d, budget, p);
          return Score{r.peak_bytes, r.step_time_s};
        }) {}
  Scorers(const Scorers&) = delete;  // the scorers capture this
  Scorers& operator=(const Scorers&) = delete;
  const CostGraph& g;
  detail::ChainModel model;
  Scorer by_chain, by_simulation;
};

// The export of a trainer that cannot train the model at all: why, and no
// setting.
nlohmann::json unsupported_export(const std::string& format, const std::string& why) {
  return nlohmann::json{{"format", format},
                        {"exact", false},
                        {"unsupported", why},
                        {"snippet", "# not supported: " + why + "\n"},
                        {"note", why}};
}

// PhysicsNeMo's best setting, simulated on its implementation `g`.
nlohmann::json physicsnemo_export(const CostGraph& g, const Device& d, std::int64_t budget, const Plan& plan) {
  const std::vector<KnobSetting> settings = detail::physicsnemo_settings(g);
  if (settings.empty())
    return unsupported_export(
        "yaml", fmt::format("PhysicsNeMo's GraphCastNet needs at least 3 processor layers (it raises \"Expected at "
                            "least 3 processor layers\"); this model has {} processor steps",
                            g.model().processor_steps));
  Scorers scorers(g, d, budget);
  nlohmann::json physicsnemo = best_setting(scorers.by_chain, g, d, budget, plan, settings);
  physicsnemo["format"] = "yaml";
  physicsnemo["snippet"] = physicsnemo_snippet(physicsnemo.at("config"));
  physicsnemo["note"] =
      g.run().rollout > 1
          ? "rollout > 1 is PhysicsNeMo's fine-tuning phase: it only switches checkpoints on, so the one-step keys "
            "stay in force and carry the processor and decoder flags; checkpoint_{processor,decoder}_finetune stay "
            "false because on one GPU train_graphcast.py turns on the encoder checkpoint for them. segments counts "
            "modules (edge and node blocks); no edge blocking"
          : "segments counts modules (edge and node blocks; whole layers only); no edge blocking";
  physicsnemo["not_modelled"] = {"recompute_activation (the example's default true: SiLU recomputed in backward)",
                                 "full_bf16 (the model cast to bfloat16 whole): actmem's bfloat16 is amp's "
                                 "autocast (--autocast cuda)",
                                 "processor_type: GraphTransformer (another model)"};
  return physicsnemo;
}

// anemoi's best setting, simulated on its implementation `g`.
nlohmann::json anemoi_export(const CostGraph& g, const Device& d, std::int64_t budget, const Plan& plan) {
  Scorers scorers(g, d, budget);
  nlohmann::json anemoi = best_setting(scorers.by_chain, g, d, budget, plan, detail::anemoi_settings(g));
  anemoi["format"] = "yaml";
  anemoi["snippet"] = anemoi_snippet(anemoi.at("config"));
  anemoi["note"] =
      "GNN mappers run under one checkpoint for the whole mapper: their num_chunks do not lower the peak, so "
      "actmem's edge blocks cannot be expressed; processor num_chunks divides num_layers, and chunk 0 also embeds "
      "the mesh edges";
  anemoi["not_modelled"] = {"GraphTransformer mappers/processor (another model)", "cpu_offload"};
  return anemoi;
}

}  // namespace

nlohmann::json trainer_exports(const CostGraph& g, const Device& d, std::int64_t budget, const Plan& plan,
                               const Report& report) {
  const std::vector<std::int64_t> edges = edges_per_stage(g.chain());
  nlohmann::json exports;

  // Host offload is JAX's (Plan::host_offload): PyTorch gets the plan without it.
  Plan on_device = plan;
  on_device.host_offload = false;
  exports["pytorch"] = plan_export(g, on_device, report);
  exports["pytorch"]["function"] = "torch.utils.checkpoint.checkpoint(use_reentrant=False)";
  exports["pytorch"]["note"] =
      "each region (and each edge block) runs under one checkpoint call; integrations/pytorch applies this";
  if (plan.host_offload) {
    exports["pytorch"]["exact"] = false;
    exports["pytorch"]["note"] = exports["pytorch"]["note"].get<std::string>() +
                                 "; the plan's host_offload is a JAX option, left out (not modelled for PyTorch)";
  }

  exports["jax"] = plan_export(g, plan, report);
  exports["jax"]["function"] = "jax.checkpoint(policy=jax.checkpoint_policies.nothing_saveable)";
  exports["jax"]["note"] = "wrap each region's stages, and each edge block, in jax.checkpoint with the policy";
  if (plan.host_offload)
    exports["jax"]["note"] =
        exports["jax"]["note"].get<std::string>() +
        "; host_offload: wrap the checkpointed scan body once more in jax.checkpoint with policy "
        "jax.checkpoint_policies.save_and_offload_only_these_names(names_which_can_be_saved=[], "
        "names_which_can_be_offloaded=[\"frames\"], offload_src=\"device\", offload_dst=\"pinned_host\"), the carried "
        "frames named with checkpoint_name(frames, \"frames\"), and place the targets with memory_kind "
        "\"pinned_host\", each step moving its own to the device (integrations/jax/graphcast_jax.py)";

  exports["physicsnemo"] = physicsnemo_export(trainer_graph(g, Implementation::physicsnemo), d, budget, plan);
  exports["anemoi"] = anemoi_export(trainer_graph(g, Implementation::anemoi), d, budget, plan);
  const CostGraph deepmind_graph = trainer_graph(g, Implementation::deepmind);
  Scorers deepmind_scorers(deepmind_graph, d, budget);
  nlohmann::json& deepmind = exports["deepmind"] =
      best_setting(deepmind_scorers.by_simulation, deepmind_graph, d, budget, plan,
                   detail::deepmind_graphcast_settings(deepmind_graph));
  deepmind["format"] = "python";
  deepmind["snippet"] = deepmind_snippet(deepmind.at("config"));
  deepmind["note"] =
      "GraphCast's own knob: each rollout step rematerialised (hk.remat); nothing at rollout 1. The per-block knobs "
      "are DeepGNN's (deepmind_deep_gnn)";

  nlohmann::json& deep_gnn = exports["deepmind_deep_gnn"] = best_setting(
      deepmind_scorers.by_chain, deepmind_graph, d, budget, plan, detail::deep_gnn_settings(deepmind_graph, edges));
  deep_gnn["format"] = "python";
  deep_gnn["snippet"] = deep_gnn_snippet(deep_gnn.at("config"));
  deep_gnn["note"] =
      "WeatherNext 2's DeepGNN, one per GNN of a GraphCast (grid to mesh, mesh, mesh to grid); "
      "edge_update_remat_block_size is edges per block (the last block the smaller); remat_mesh_gnn left false";
  return exports;
}

std::vector<std::string> trainer_export_names() {
  return {"pytorch", "jax", "physicsnemo", "anemoi", "deepmind", "deepmind_deep_gnn"};
}

}  // namespace actmem

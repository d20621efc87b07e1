#pragma once
// A plan in each trainer's own knobs (docs/trainer-exports.md).
//
// Each trainer can express only some plans, and runs its knobs its own way
// (read from its source): PhysicsNeMo checkpoints the encoder with the first
// processor layer, the decoder with the last, the inner processor in
// `segments`, and reads `_finetune` keys for rollout > 1; anemoi (model=gnn)
// checkpoints each mapper whole (its mapper chunks share that one
// checkpoint) and the processor in chunks that divide the layer count;
// DeepMind's GraphCast rematerialises whole rollout steps; DeepMind's DeepGNN
// groups message-passing steps and blocks edge updates per GNN. For each
// trainer the export is the setting of its knobs that runs the plan itself
// when there is one ("exact": true), and otherwise the fastest setting that
// fits the budget (or, if none fits, the one with the least memory);
// "predicted" is the simulation of what the trainer runs with that setting.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"

namespace actmem {

// {"pytorch": …, "jax": …, "physicsnemo": …, "anemoi": …, "deepmind": …,
// "deepmind_deep_gnn": …}; each entry holds "config" (the trainer's keys,
// nested as it reads them), "format" and "snippet" (the config as text to
// paste: yaml, python or json), "exact" (the trainer runs the plan as
// given), "plan" (the plan it runs instead, as actmem simulated it),
// "predicted" {peak_bytes, step_time_s, fits, recompute_overhead} of that
// plan, "note", and where known "not_modelled" (knobs of the trainer that
// change memory but that actmem does not cost). A trainer that cannot
// train the model at all (PhysicsNeMo below 3 processor layers) has
// "unsupported" (why), "format", "snippet" (a comment saying why),
// "exact": false and "note", and no config, plan or predicted.
nlohmann::json trainer_exports(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                               const Plan& plan, const Report& report);

// The export names, in the order trainer_exports writes them.
std::vector<std::string> trainer_export_names();

}  // namespace actmem

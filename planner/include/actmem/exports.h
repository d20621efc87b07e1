#pragma once
// A plan in each trainer's own knobs (docs/plan-format.md, "exports").
//
// Each trainer can express only some plans: PhysicsNeMo checkpoints the
// encoder with the first processor layer, the decoder with the last, and the
// inner processor in `segments` that divide 2 × (layers − 2), with no edge
// blocking; anemoi checkpoints processor chunks that divide the layer count
// and chunks the mappers' edges; DeepMind's code groups processor steps and
// blocks the encoder/decoder edge updates. For each trainer the export is
// the plan itself when the trainer can express it, and otherwise the fastest
// plan the trainer can express that fits the budget (or, if none fits, the
// one with the least memory), with the simulator's figures for it.

#include <cstdint>

#include <nlohmann/json_fwd.hpp>

#include "actmem/cost_graph.h"
#include "actmem/device.h"
#include "actmem/plan.h"
#include "actmem/report.h"

namespace actmem {

// {"pytorch": …, "jax": …, "physicsnemo": …, "anemoi": …, "deepmind": …};
// each entry holds the trainer's keys, "exact" (the plan as given) and
// "predicted" {peak_bytes, step_time_s, fits, recompute_overhead}.
nlohmann::json trainer_exports(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                               const Plan& plan, const Report& report);

}  // namespace actmem

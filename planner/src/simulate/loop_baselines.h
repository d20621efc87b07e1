#pragma once
// The memory a scanned rollout's loop holds around each step's body: what
// the solver's loop-body chain model (solve/solver_model.h) adds to the
// body's own work to predict a step-checkpointed plan's peak.
//
// A rollout whose every step is under its own checkpoint runs the backward
// pass as a loop over the steps, last to first: each iteration recomputes
// its step (the body) and differentiates through it. What is live when a
// body starts (the weights and optimizer state, the steps' kept inputs and
// loss seeds, the gradients in flight between steps, the parameter
// gradients, what XLA's loop holds, docs/journal.md J14) does not depend
// on the plan inside the step, only on the step; so one simulation of any
// plan gives it for all.

#include <cstdint>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"

namespace actmem::detail {

struct LoopBaselines {
  // Per rollout step: the memory, static bytes included, as its loop body
  // starts its recomputation.
  std::vector<std::int64_t> body_start_bytes;
  // The memory at the optimizer step, after the backward loop.
  std::int64_t optimizer_bytes = 0;
};

// `plan` must checkpoint each step (step_checkpoint) and graph.run().rollout > 1.
LoopBaselines loop_baselines(const CostGraph& graph, const Device& device, const Plan& plan);

}  // namespace actmem::detail

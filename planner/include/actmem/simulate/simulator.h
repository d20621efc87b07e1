#pragma once
// The simulator: runs the schedule a trainer following a plan would run and
// tracks every byte (docs/cost-model.md).
//
// Forward pass in op order: ops inside a checkpoint region keep nothing for
// the backward pass; each region keeps its inputs. Edge-blocked stages run
// their edge update block by block, each block under its own checkpoint, and
// concatenate the block outputs. Then the loss, then the backward pass in
// reverse, recomputing each region (nested regions and blocks too) before
// differentiating through it. A tensor is freed when its last holder lets
// go: a forward consumer still to run, an op that saved it, a region that
// keeps it. Gradients are allocated and accumulated by the framework's
// rules (actmem/cost/memory_rules.h).

#include <cstdint>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"

namespace actmem {

struct SimulationOptions {
  // A row per op run; more than kMaxTimelineRows (actmem/util/limits.h) is an
  // InputError("--timeline", …).
  bool record_timeline = false;
  // Report::live_at_peak: every buffer live at the peak (costs a second
  // run of the simulation).
  bool record_peak_buffers = false;
};

// Simulates one training step. `budget_bytes` is what fits is judged
// against: 1 B to device.memory_bytes (budget_within(), InputError
// otherwise), usually all of it; the device's reserve is part of the
// predicted peak. The plan must have been made for graph.stages():
// validate() (plan.h) checks it, throwing InputError.
Report simulate(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const Plan& plan,
                const SimulationOptions& options = {});

}  // namespace actmem

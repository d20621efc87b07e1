#pragma once
// The planner: the fastest plan that fits (docs/solver.md).
//
// Plan space: the stage chain split into consecutive segments, each either
// run plainly or as a checkpoint region; a region may nest inner regions
// that split its stages again (one level); each stage with an edge update
// runs it in B blocks, B from SolverOptions::block_choices. Objective: the
// simulator's step_time_s, subject to the simulator's peak_bytes <=
// budget_bytes. Every figure returned is the simulator's, for the returned
// plan.

#include <cstdint>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"

namespace actmem {

struct SolverOptions {
  // Edge-block counts tried per stage (each capped at the stage's edges;
  // counts outside 1..kMaxEdgeBlocks are dropped). Empty: 1, 2, 4, …, 1024.
  std::vector<std::int64_t> block_choices;
  // Search regions with inner regions nested one level (exact: tests
  // enumerate the nested space). Off by default: on full GraphCast it takes
  // 0.3-0.5 s at rollout 1 and 1.5-2.4 s at rollout 12, against 18-20 ms
  // and about 1 s without (docs/solver.md "Speed").
  bool allow_nested_regions = false;
  // Where no plan fits with everything on the device and the rollout is
  // XLA's scanned loop (JAX, rollout > 1), search the step-checkpointed
  // plans again with the rollout's per-step state in host memory
  // (Plan::host_offload); if nothing fits either way, solve() returns the
  // least-peak plan of both. solve() only: minimum_memory() and
  // pareto_frontier() describe the device-only space.
  bool allow_host_offload = true;
};

struct Solution {
  bool feasible = false;            // a plan within the budget exists
  Plan plan;                        // the fastest that fits; if none fits as written, the one with the
                                    // least peak (if that fits through the compiler's rematerialisation,
                                    // its edge blocks no finer than keeps it within 2% of that peak)
  Report report;                    // simulate() of `plan` against the budget
  std::int64_t min_peak_bytes = 0;  // the least peak any plan in the space reaches
};

Solution solve(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
               const SolverOptions& options = {});

// solve() on each of `devices` against the budget beside it, sharing what
// does not depend on the device: the space's fastest plan (fastest_plan()),
// where it fits a device's budget, is that device's answer without a search
// for it; and memory is the same on every device but for its reserve, so
// the least peak any plan reaches is searched once (each device's own where
// the space depends on the device's speed: PyTorch's step-checkpointed
// plans at rollout > 1, taken from the one-step frontier). Other
// devices are solved as solve() solves them. The answers are solve()'s,
// device by device (tests/solver_test.cpp). A budget of 0 B (a headroom
// of a device's whole memory) is answered too: nothing fits, and the plan
// is the least-memory one, which says what would be needed.
std::vector<Solution> solve_each(const CostGraph& graph, const std::vector<Device>& devices,
                                 const std::vector<std::int64_t>& budgets, const SolverOptions& options = {});

// The plan of the space that recomputes least, on any device: no
// checkpoint at all, or, where the space holds only step-checkpointed
// plans (a JAX rollout, XLA's scanned loop), each step checkpointed with
// nothing inside. Every other plan runs the same ops and more, so no plan
// is faster on any device (tests/solver_test.cpp).
Plan fastest_plan(const CostGraph& graph);

// The least peak_bytes any plan in the space reaches, and a plan reaching it.
Solution minimum_memory(const CostGraph& graph, const Device& device, const SolverOptions& options = {});

struct ParetoPoint {
  Plan plan;
  Report report;
};

// Plans not dominated in (peak_bytes, step_time_s), by increasing peak.
std::vector<ParetoPoint> pareto_frontier(const CostGraph& graph, const Device& device,
                                         const SolverOptions& options = {});

}  // namespace actmem

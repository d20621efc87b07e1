#pragma once
// The scheduler's question: does one training step fit within a budget, with
// the best plan, and what is the least memory it could ever need?
//
// "Does not fit" is an answer (fits == false), never an exception. Every
// figure is the simulator's, for the returned plan.

#include <cstdint>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"
#include "actmem/solve/solver.h"

namespace actmem {

struct FitAnswer {
  bool fits = false;                // some plan's peak_bytes <= budget_bytes
  std::int64_t peak_bytes = 0;      // of `plan` (report.peak_bytes)
  std::int64_t min_peak_bytes = 0;  // the least peak any plan reaches on this device
  std::int64_t budget_bytes = 0;
  Plan plan;      // the fastest plan that fits; if none fits, the one with the least peak
  Report report;  // simulate() of `plan` against budget_bytes
};

// Solves for the fastest plan within `budget_bytes` (solver.h), which must
// lie within the device's memory (InputError("budget", …) otherwise).
FitAnswer fits(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
               const SolverOptions& options = {});

// The same with the device's whole memory as the budget (its reserve is part
// of every predicted peak), as the CLI's default.
FitAnswer fits(const CostGraph& graph, const Device& device);

// fits() on each of `devices` against the budget beside it, sharing what
// does not depend on the device (solve_each(), solver.h).
std::vector<FitAnswer> fits_each(const CostGraph& graph, const std::vector<Device>& devices,
                                 const std::vector<std::int64_t>& budgets, const SolverOptions& options = {});

}  // namespace actmem

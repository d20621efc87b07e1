#pragma once
// Everything `actmem report` draws, computed by the library (simulator,
// solver, exports) for one model, run, device, budget and plan. Gathering
// is separate from drawing, so that the tests can compare what is drawn
// with what was computed.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"
#include "actmem/solve/fit.h"
#include "actmem/solve/solver.h"

namespace actmem::picture {

// A plan marked on the Pareto picture: the chosen plan, the two extremes
// and each trainer's best expressible setting.
struct MarkedPlan {
  std::string key;    // "chosen", "none", "full", "deepmind_deep_gnn", "physicsnemo", "anemoi"
  std::string label;  // for people
  std::int64_t peak_bytes = 0;
  double step_time_s = 0;
  bool fits = false;
};

// One catalog device with the fastest plan that fits it (its whole memory
// as the budget), or the least memory any plan needs there.
struct CatalogEntry {
  Device device;
  FitAnswer answer;
  bool is_target = false;  // the device the report is for
};

struct ReportFigures {
  // Whose step: model, run, device and budget; `subtitle` says it in words
  // (left to the caller: "model graphcast (36.3M parameters), jax …").
  std::string subtitle;
  std::string model_name;
  RunOptions run;
  Device device;
  std::int64_t budget_bytes = 0;
  std::vector<std::string> stages;

  Plan plan;
  std::string plan_origin;            // "the solver's fastest plan that fits", "plan.json", "built-in plan deepmind"
  Report report;                      // simulate() of `plan`, with its timeline rows
  std::vector<ParetoPoint> frontier;  // reports judged against budget_bytes
  std::vector<MarkedPlan> marks;
  nlohmann::json exports;  // trainer_exports() of the plan
  std::vector<CatalogEntry> catalog;
};

// How much of a catalog device's memory a plan may use (its memory less the
// headroom `actmem fit` keeps free; 0 where that leaves nothing).
using CatalogBudget = std::function<std::int64_t(const Device&)>;

// Runs everything the report shows. Reports progress steps (actmem/util/progress.h).
// Catalog devices are judged against `catalog_budget` (default: all their memory).
ReportFigures gather_figures(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const Plan& plan,
                             std::string plan_origin, const SolverOptions& options,
                             const CatalogBudget& catalog_budget = {});

}  // namespace actmem::picture

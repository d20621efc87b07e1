#pragma once
// actmem's library API in one include (docs/api.md).
//
//   ModelDescription model = load_model("graphcast");          // preset, file, or fill the struct
//   RunOptions run;  run.batch = 2;  run.framework = Framework::pytorch;
//   run.add_rule_off("torch.slices_are_views");                 // what-if: a memory rule off (rule_cards())
//   Device device = load_device("a100-80gb");                  // catalog id, file, or device_with_memory()
//   CostGraph graph = CostGraph::build(model, run);            // build once, share across threads
//   FitAnswer answer = fits(graph, device);                     // fits, peak, min_peak_bytes, plan, report
//   Report r = simulate(graph, device, device.memory_bytes, builtin_plan("deepmind", graph.chain()));
//   std::vector<ParetoPoint> front = pareto_frontier(graph, device);
//   nlohmann::json doc = plan_to_document(graph, device, answer.budget_bytes, answer.plan);
//   Plan plan = plan_from_document(doc, graph, "plan");
//
// Contracts:
//   * Bad input is an InputError (error.h) carrying source(), field() (a JSON
//     pointer) and message(); "does not fit" is a result (FitAnswer::fits,
//     Report::fits, Solution::feasible), never an exception.
//   * Every function may be called concurrently from many threads, also on
//     the same const CostGraph, Device and Plan objects: none keeps mutable
//     state between calls (tests/thread_safety_test.cpp, run under
//     ThreadSanitizer). Objects are not synchronised for concurrent writes.

#include "actmem/cost/cost_graph.h"
#include "actmem/cost/memory_rules.h"
#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/model/run_options.h"
#include "actmem/plan/builtin_plans.h"
#include "actmem/plan/exports.h"
#include "actmem/plan/output_files.h"
#include "actmem/plan/plan_document.h"
#include "actmem/plan/plan_json.h"
#include "actmem/simulate/accuracy_notes.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"
#include "actmem/simulate/simulator.h"
#include "actmem/solve/fit.h"
#include "actmem/solve/solver.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/progress.h"
#include "actmem/util/units.h"

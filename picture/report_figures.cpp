#include "report_figures.h"

#include <fmt/format.h>

#include "actmem/plan/builtin_plans.h"
#include "actmem/plan/exports.h"
#include "actmem/simulate/simulator.h"
#include "actmem/util/progress.h"

namespace actmem::picture {
namespace {

MarkedPlan mark(std::string key, std::string label, const Report& r) {
  return {std::move(key), std::move(label), r.peak_bytes, r.step_time_s, r.fits};
}

// The trainers whose knobs cannot express every plan: their best setting
// comes from the exports.
std::vector<MarkedPlan> trainer_marks(const nlohmann::json& exports, std::int64_t budget) {
  std::vector<MarkedPlan> marks;
  for (const auto& [key, label] : {std::pair{"deepmind_deep_gnn", "DeepMind DeepGNN"},
                                   std::pair{"physicsnemo", "PhysicsNeMo"}, std::pair{"anemoi", "anemoi"}}) {
    if (!exports.at(key).contains("predicted")) continue;  // the trainer cannot train the model
    const nlohmann::json& predicted = exports.at(key).at("predicted");
    const std::int64_t peak = predicted.at("peak_bytes").get<std::int64_t>();
    marks.push_back(
        {key, fmt::format("{} best", label), peak, predicted.at("step_time_s").get<double>(), peak <= budget});
  }
  return marks;
}

std::vector<ParetoPoint> judged_frontier(const CostGraph& graph, const Device& device, std::int64_t budget,
                                         const SolverOptions& options) {
  std::vector<ParetoPoint> frontier = pareto_frontier(graph, device, options);
  for (ParetoPoint& p : frontier) {
    p.report.budget_bytes = budget;
    p.report.fits = p.report.peak_bytes <= budget;
  }
  return frontier;
}

}  // namespace

ReportFigures gather_figures(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const Plan& plan,
                             std::string plan_origin, const SolverOptions& options,
                             const CatalogBudget& catalog_budget) {
  const int steps = 4;
  ReportFigures f;
  f.model_name = graph.model().name;
  f.run = graph.run();
  f.device = device;
  f.budget_bytes = budget_bytes;
  f.stages = graph.stages();
  f.plan = plan;
  f.plan_origin = std::move(plan_origin);

  report_progress("simulating the plan", 1, steps);
  // The figures as `actmem simulate` gives them; the rows from a second run
  // (which runs equal edge blocks one by one, so its sums may differ in the
  // last bits).
  SimulationOptions with_timeline;
  with_timeline.record_timeline = true;
  f.report = simulate(graph, device, budget_bytes, plan);
  f.report.timeline = simulate(graph, device, budget_bytes, plan, with_timeline).timeline;

  report_progress("Pareto frontier", 2, steps);
  f.frontier = judged_frontier(graph, device, budget_bytes, options);

  report_progress("trainer exports", 3, steps);
  f.exports = trainer_exports(graph, device, budget_bytes, plan, f.report);
  f.marks.push_back(mark("chosen", "this plan", f.report));
  f.marks.push_back(mark("none", "no checkpoints", simulate(graph, device, budget_bytes, empty_plan(f.stages))));
  f.marks.push_back(
      mark("full", "full checkpointing", simulate(graph, device, budget_bytes, builtin_plan("full", graph.chain()))));
  for (MarkedPlan& m : trainer_marks(f.exports, budget_bytes)) f.marks.push_back(std::move(m));

  report_progress("catalog", 4, steps);
  std::vector<std::int64_t> budgets;
  for (const Device& d : device_catalog()) budgets.push_back(catalog_budget ? catalog_budget(d) : d.memory_bytes);
  std::vector<FitAnswer> answers = fits_each(graph, device_catalog(), budgets, options);
  for (std::size_t i = 0; i < answers.size(); ++i)
    f.catalog.push_back({device_catalog()[i], std::move(answers[i]), device_catalog()[i].id == device.id});
  return f;
}

}  // namespace actmem::picture

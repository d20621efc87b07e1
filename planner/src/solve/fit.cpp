#include "actmem/solve/fit.h"

namespace actmem {
namespace {

FitAnswer answer_of(Solution solution, std::int64_t budget_bytes) {
  FitAnswer answer;
  answer.fits = solution.feasible;
  answer.peak_bytes = solution.report.peak_bytes;
  answer.min_peak_bytes = solution.min_peak_bytes;
  answer.budget_bytes = budget_bytes;
  answer.plan = std::move(solution.plan);
  answer.report = std::move(solution.report);
  return answer;
}

}  // namespace

FitAnswer fits(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const SolverOptions& options) {
  budget_within(device, budget_bytes, "budget");
  return answer_of(solve(graph, device, budget_bytes, options), budget_bytes);
}

FitAnswer fits(const CostGraph& graph, const Device& device) { return fits(graph, device, device.memory_bytes); }

std::vector<FitAnswer> fits_each(const CostGraph& graph, const std::vector<Device>& devices,
                                 const std::vector<std::int64_t>& budgets, const SolverOptions& options) {
  for (std::size_t i = 0; i < devices.size() && i < budgets.size(); ++i)
    if (budgets[i] != 0) budget_within(devices[i], budgets[i], "budget");
  std::vector<FitAnswer> answers;
  std::vector<Solution> solutions = solve_each(graph, devices, budgets, options);
  for (std::size_t i = 0; i < solutions.size(); ++i) answers.push_back(answer_of(std::move(solutions[i]), budgets[i]));
  return answers;
}

}  // namespace actmem

#include "actmem/solve/fit.h"

namespace actmem {

FitAnswer fits(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const SolverOptions& options) {
  budget_within(device, budget_bytes, "budget");
  Solution solution = solve(graph, device, budget_bytes, options);
  FitAnswer answer;
  answer.fits = solution.feasible;
  answer.peak_bytes = solution.report.peak_bytes;
  answer.min_peak_bytes = solution.min_peak_bytes;
  answer.budget_bytes = budget_bytes;
  answer.plan = std::move(solution.plan);
  answer.report = std::move(solution.report);
  return answer;
}

FitAnswer fits(const CostGraph& graph, const Device& device) { return fits(graph, device, device.memory_bytes); }

}  // namespace actmem

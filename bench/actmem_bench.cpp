// Times solve() and simulate() on the full GraphCast (docs/solver.md).
//   actmem_bench [runs] [nested] [rollout1] [model=NAME] [blocks=1,2,4]
//   (default 5 runs; the median is printed; "nested": with nested regions;
//   "rollout1": skip rollout 12; "model=NAME": another preset;
//   "blocks=1,2,4": the edge-block counts tried)
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/plan/builtin_plans.h"
#include "actmem/simulate/simulator.h"
#include "actmem/solve/solver.h"

using namespace actmem;

namespace {

template <class F>
double median_ms(int runs, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::max(1, std::atoi(argv[1])) : 5;
  SolverOptions options;
  bool rollout1_only = false;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "nested") == 0) options.allow_nested_regions = true;
    if (std::strcmp(argv[i], "rollout1") == 0) rollout1_only = true;
  }
  std::string model_name = "graphcast";
  for (int i = 2; i < argc; ++i) {
    if (std::strncmp(argv[i], "model=", 6) == 0) model_name = argv[i] + 6;
    if (std::strncmp(argv[i], "blocks=", 7) == 0) {
      const std::string list = argv[i] + 7;
      for (std::size_t at = 0; at < list.size();) {
        const std::size_t comma = std::min(list.find(',', at), list.size());
        options.block_choices.push_back(std::atoll(list.substr(at, comma - at).c_str()));
        at = comma + 1;
      }
    }
  }
  const ModelDescription model = load_model(model_name);
  const Device device = load_device("tpu-v4");
  fmt::print("{}, bfloat16, batch 1, on {} (budget {:.2f} GiB); median of {} runs\n", model_name, device.id,
             gib(device.memory_bytes), runs);
  fmt::print("{:<8} {:>7} {:>12} {:>14}  {}\n", "framework", "rollout", "solve ms", "simulate ms", "result");
  for (Framework framework : {Framework::pytorch, Framework::jax})
    for (std::int64_t rollout : {1, 12}) {
      if (rollout > 1 && rollout1_only) continue;
      RunOptions run;
      run.framework = framework;
      run.rollout = rollout;
      const CostGraph graph = CostGraph::build(model, run);
      Solution solution;
      const double solve_ms = median_ms(runs, [&] { solution = solve(graph, device, device.memory_bytes, options); });
      const double simulate_ms =
          median_ms(runs, [&] { (void)simulate(graph, device, device.memory_bytes, solution.plan); });
      fmt::print("{:<8} {:>7} {:>12.1f} {:>14.3f}  {}\n", to_string(framework), rollout, solve_ms, simulate_ms,
                 solution.feasible
                     ? fmt::format("fits, peak {:.2f} GiB, recompute +{:.1f}%", gib(solution.report.peak_bytes),
                                   100 * solution.report.recompute_overhead())
                     : fmt::format("does not fit: needs {:.2f} GiB", gib(solution.min_peak_bytes)));
    }

  // The configuration DeepMind trained: jax, rollout 1, beside its hand plan.
  RunOptions run;
  run.framework = Framework::jax;
  const CostGraph graph = CostGraph::build(model, run);
  const Solution solution = solve(graph, device, device.memory_bytes, options);
  const Report deepmind = simulate(graph, device, device.memory_bytes, builtin_plan("deepmind", graph.chain()));
  const Solution least = minimum_memory(graph, device, options);
  fmt::print("\njax, rollout 1, {}:\n", device.id);
  fmt::print("  solver:   {}\n            peak {:.2f} GiB ({}), step {:.4f} s, recompute +{:.1f}%\n",
             describe(solution.plan, graph.stages()), gib(solution.report.peak_bytes),
             solution.feasible ? "fits" : "does not fit", solution.report.step_time_s,
             100 * solution.report.recompute_overhead());
  fmt::print("  deepmind: {}\n            peak {:.2f} GiB ({}), step {:.4f} s, recompute +{:.1f}%\n",
             describe(builtin_plan("deepmind", graph.chain()), graph.stages()), gib(deepmind.peak_bytes),
             deepmind.fits ? "fits" : "does not fit", deepmind.step_time_s, 100 * deepmind.recompute_overhead());
  fmt::print("  least memory any plan needs: {:.2f} GiB ({})\n", gib(least.min_peak_bytes),
             describe(least.plan, graph.stages()));
  return 0;
}

// Built against an installed actmem only (tests/install/CMakeLists.txt).
// Exercises each part of the library API once and exits non-zero on any
// surprise, printing what was wrong.
#include <iostream>
#include <string>

#include <actmem/actmem.h>

namespace {

int failures = 0;

void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::cerr << "consumer: FAILED: " << what << '\n';
    ++failures;
  }
}

}  // namespace

int main() {
  using namespace actmem;
  const ModelDescription model = load_model("graphcast-small");
  RunOptions run;
  run.framework = Framework::pytorch;
  const Device device = load_device("a100-40gb");
  const CostGraph graph = CostGraph::build(model, run);

  const FitAnswer answer = fits(graph, device);
  expect(answer.fits, "graphcast-small fits on an a100-40gb");
  expect(answer.peak_bytes <= answer.budget_bytes, "the peak is within the budget");
  expect(answer.min_peak_bytes <= answer.peak_bytes, "min_peak_bytes <= peak_bytes");

  const FitAnswer short_budget = fits(graph, device, answer.min_peak_bytes - 1);
  expect(!short_budget.fits, "one byte below the least peak does not fit, as a result");

  const Report report = simulate(graph, device, device.memory_bytes, answer.plan);
  expect(report.peak_bytes == answer.peak_bytes, "simulate() agrees with fits()");

  const nlohmann::json document = plan_to_document(graph, device, device.memory_bytes, answer.plan);
  expect(plan_from_document(document, graph, "document") == answer.plan, "the plan survives its JSON document");

  expect(!pareto_frontier(graph, device).empty(), "the Pareto frontier is not empty");

  try {
    load_device("tpu-v9");
    expect(false, "an unknown device is an InputError");
  } catch (const InputError& e) {
    expect(e.is_argument() && e.source() == "device", std::string{"InputError::source(): "} + e.source());
  }

  std::cout << "consumer: graphcast-small on " << device.id << ": peak " << format_bytes(answer.peak_bytes) << ", plan "
            << describe(answer.plan, graph.stages()) << '\n';
  return failures == 0 ? 0 : 1;
}

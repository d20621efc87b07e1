// Model files: any bytes are refused with a clear InputError, or give a
// model that reads back from its own JSON and whose training step builds
// and simulates with sound figures (no overflow: UBSan aborts on one).
#include <cmath>
#include <functional>

#include "actmem/actmem.h"
#include "actmem/plan/builtin_plans.h"
#include "fuzz_support.h"
#include "util/json_text.h"

namespace {

using namespace actmem;
using fuzz::expect;

// Run options chosen from the model's fingerprint: batch, rollout, dtype and
// framework vary with the input, the largest batch included.
RunOptions run_for(const ModelDescription& m) {
  const std::size_t bits = std::hash<std::string>{}(fingerprint(m));
  RunOptions run;
  run.batch = bits & 1 ? kMaxBatch : 1 + static_cast<std::int64_t>((bits >> 1) & 7);
  run.rollout = 1 + static_cast<std::int64_t>((bits >> 4) & 3);
  run.dtype = bits & 64 ? DType::float32 : DType::bfloat16;
  run.framework = bits & 128 ? Framework::pytorch : Framework::jax;
  return run;
}

void check_round_trip(const ModelDescription& m) {
  nlohmann::json j = to_json(m);
  j["fingerprint"] = fingerprint(m);
  j["parameter_count"] = parameter_count(m);
  expect(fingerprint(model_from_json(j, "again.json")) == fingerprint(m), "a model reads back from its JSON");
}

void check_report(const Report& r) {
  expect(r.peak_bytes > 0 && r.peak_bytes == r.breakdown.total(), "the peak is the sum of its parts");
  expect(r.peak_bytes >= r.breakdown.parameters + r.breakdown.inputs, "the peak holds the resident bytes");
  expect(std::isfinite(r.step_time_s) && r.step_time_s > 0, "a finite step time");
}

void check_step(const ModelDescription& m) {
  const CostGraph g = CostGraph::build(m, run_for(m));
  const Device device = device_with_memory(kMaxDeviceBytes);
  for (const char* plan : {"none", "full", "deepmind:3"})
    check_report(simulate(g, device, device.memory_bytes, builtin_plan(plan, g.chain())));
  if (m.processor_steps <= 2 && g.run().rollout == 1) {  // the solver in milliseconds
    const Solution s = minimum_memory(g, device);
    check_report(s.report);
    expect(s.min_peak_bytes == s.report.peak_bytes, "the least peak is the plan's");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const nlohmann::json document = detail::parse_json(fuzz::text_of(data, size), "model.json");
    if (fuzz::costly_geometry(document)) return 0;
    const ModelDescription m = model_from_json(document, "model.json");
    check_round_trip(m);
    check_step(m);
  } catch (const InputError& e) {
    fuzz::expect_clear(e);
  }
  return 0;
}

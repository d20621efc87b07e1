// Plans: a plan document (text starting with '{') or a built-in plan name
// is refused with a clear InputError, or gives a plan for the tiny model
// that reads back from its own JSON and simulates with sound figures. A
// document's device and budget are applied as `actmem simulate --plan`
// applies them (its own device, else the default tpu-v4; its budget
// checked against that device): the budget a step is judged against is
// never more than the device's memory.
#include <cmath>
#include <optional>

#include "actmem/actmem.h"
#include "actmem/plan/builtin_plans.h"
#include "fuzz_support.h"
#include "util/json_text.h"

namespace {

using namespace actmem;

// A plan with the device and budget it is simulated on.
struct Target {
  Plan plan;
  Device device;
  std::int64_t budget_bytes = 0;
};

// The target of a document or a built-in name; nothing for a document
// whose model has a costly geometry (skipped, fuzz_support.h).
std::optional<Target> target_of(std::string_view text, const CostGraph& g) {
  static const Device kDefault = load_device("tpu-v4");  // the CLI's default device
  if (!text.starts_with("{")) return Target{builtin_plan(text, g.chain()), kDefault, kDefault.memory_bytes};
  const nlohmann::json document = detail::parse_json(text, "plan.json");
  if (document.is_object() && document.contains("model") && fuzz::costly_geometry(document["model"]))
    return std::nullopt;
  const PlanDocument d = plan_document_from_json(document, "plan.json");
  const Device device = d.device.value_or(kDefault);
  return Target{plan_for(d, g), device, d.budget_on(device)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using fuzz::expect;
  const CostGraph& g = fuzz::tiny_graph();
  try {
    const std::optional<Target> t = target_of(fuzz::text_of(data, size), g);
    if (!t) return 0;
    const nlohmann::json back = plan_to_json(t->plan, g.stages());
    expect(plan_from_json(back, g.chain(), "again.json") == t->plan, "a plan reads back");
    const Report r = simulate(g, t->device, t->budget_bytes, t->plan);
    expect(r.budget_bytes == t->budget_bytes && r.budget_bytes <= t->device.memory_bytes,
           "the budget is within the device's memory");
    expect(r.peak_bytes > 0 && r.peak_bytes == r.breakdown.total(), "the peak is the sum of its parts");
    expect(r.peak_bytes > r.budget_bytes || r.fits, "a peak within the budget fits");
    expect(std::isfinite(r.step_time_s) && r.recompute_flops >= 0, "sound compute figures");
  } catch (const InputError& e) {
    fuzz::expect_clear(e);
  }
  return 0;
}

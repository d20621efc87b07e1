// Plans: a plan document (text starting with '{') or a built-in plan name
// is refused with a clear InputError, or gives a plan for the tiny model
// that reads back from its own JSON and simulates with sound figures.
#include <cmath>
#include <optional>

#include "actmem/actmem.h"
#include "fuzz_support.h"
#include "util/json_text.h"

namespace {

using namespace actmem;

// The plan of a document or a built-in name; nothing for a document whose
// model has a costly geometry (skipped, fuzz_support.h).
std::optional<Plan> plan_of(std::string_view text, const CostGraph& g) {
  if (!text.starts_with("{")) return builtin_plan(text, g.chain());
  const nlohmann::json document = detail::parse_json(text, "plan.json");
  if (document.is_object() && document.contains("model") && fuzz::costly_geometry(document["model"]))
    return std::nullopt;
  return plan_for(plan_document_from_json(document, "plan.json"), g);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using fuzz::expect;
  const CostGraph& g = fuzz::tiny_graph();
  try {
    const std::optional<Plan> plan = plan_of(fuzz::text_of(data, size), g);
    if (!plan) return 0;
    const nlohmann::json back = plan_to_json(*plan, g.stages());
    expect(plan_from_json(back, g.chain(), "again.json") == *plan, "a plan reads back");
    const Device device = load_device("a100-80gb");
    const Report r = simulate(g, device, device.memory_bytes, *plan);
    expect(r.peak_bytes > 0 && r.peak_bytes == r.breakdown.total(), "the peak is the sum of its parts");
    expect(std::isfinite(r.step_time_s) && r.recompute_flops >= 0, "sound compute figures");
  } catch (const InputError& e) {
    fuzz::expect_clear(e);
  }
  return 0;
}

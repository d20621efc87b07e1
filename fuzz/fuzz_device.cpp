// Device files: any bytes are refused with a clear InputError, or give a
// device that reads back from its own JSON and on which a step has finite,
// positive times.
#include <cmath>

#include "actmem/actmem.h"
#include "actmem/plan/builtin_plans.h"
#include "fuzz_support.h"
#include "util/json_text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace actmem;
  using fuzz::expect;
  try {
    const Device d = device_from_json(detail::parse_json(fuzz::text_of(data, size), "device.json"), "device.json", "");
    expect(to_json(device_from_json(to_json(d), "again.json", "")) == to_json(d), "a device reads back from its JSON");
    expect(budget_within(d, d.memory_bytes, "budget") == d.memory_bytes, "the whole memory is a budget");
    const CostGraph& g = fuzz::tiny_graph();
    const Report r = simulate(g, d, d.memory_bytes, builtin_plan("deepmind:4", g.chain()));
    expect(std::isfinite(r.step_time_s) && r.step_time_s > 0, "a finite step time");
    expect(r.breakdown.reserved == d.reserve_bytes, "the reserve is part of the peak");
    // Fits: the peak within the budget, or (JAX) only through the compiler's
    // own rematerialisation, whose floor is then under the peak (J7).
    if (r.peak_bytes <= d.memory_bytes) expect(r.fits, "a peak within the budget fits");
    if (r.fits && r.peak_bytes > d.memory_bytes)
      expect(r.compiler_floor_bytes < r.peak_bytes, "over the budget, fits only through the compiler's floor");
  } catch (const InputError& e) {
    fuzz::expect_clear(e);
  }
  return 0;
}

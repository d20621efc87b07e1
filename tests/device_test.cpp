#include <doctest/doctest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "actmem/model/device.h"
#include "actmem/util/error.h"
#include "actmem/util/units.h"

TEST_SUITE("device") {
  TEST_CASE("catalog: every device the design names is present with sane figures") {
    std::set<std::string> ids;
    for (const auto& d : actmem::device_catalog()) {
      CAPTURE(d.id);
      ids.insert(d.id);
      CHECK(d.memory_bytes > d.reserve_bytes);
      CHECK(d.reserve_bytes > 0);
      CHECK(d.peak_fp32_flops > 1e12);
      CHECK(d.bandwidth_bytes_per_s > 1e11);
      CHECK_FALSE(d.source.empty());
    }
    for (const char* id : {"tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e", "v100-16gb", "v100-32gb", "a100-40gb",
                           "a100-80gb", "h100-80gb", "h200-141gb", "l40s-48gb", "rtx4090-24gb", "mi250x", "mi300x"}) {
      CAPTURE(id);
      CHECK(ids.count(id) == 1);
    }
    CHECK(actmem::load_device("tpu-v4").memory_bytes == 32 * actmem::kGiB);
  }

  TEST_CASE("devices: an unknown id suggests the closest catalog id") {
    CHECK_THROWS_WITH_AS(actmem::load_device("tpu-v3"),
                         "device: 'tpu-v3' is neither a catalog device nor a readable file (did you mean "
                         "'tpu-v4'?); see 'actmem devices'",
                         actmem::InputError);
  }

  TEST_CASE("devices: a device file is validated field by field") {
    nlohmann::json d{{"id", "mine"},
                     {"memory_bytes", 1000},
                     {"reserve_bytes", 2000},
                     {"peak_fp32_flops", 1e12},
                     {"bandwidth_bytes_per_s", 1e11}};
    CHECK_THROWS_WITH_AS(actmem::device_from_json(d, "mine.json", ""),
                         "mine.json: /reserve_bytes: expected less than memory_bytes (1000), got 2000",
                         actmem::InputError);
    d["reserve_bytes"] = 10;
    CHECK(actmem::device_from_json(d, "mine.json", "").usable_bytes() == 990);
  }
}

#include <doctest/doctest.h>

#include "actmem/util/error.h"
#include "actmem/util/suggest.h"
#include "actmem/util/units.h"

TEST_SUITE("units") {
  TEST_CASE("byte sizes: binary and decimal suffixes parse to exact byte counts") {
    struct Case {
      const char* text;
      std::int64_t bytes;
    };
    const Case cases[] = {{"32GiB", 34359738368}, {"30 GB", 30000000000}, {"512MiB", 536870912},
                          {"1e9", 1000000000},    {"1.5GiB", 1610612736}, {"17", 17},
                          {"2KiB", 2048},         {"80GB", 80000000000}};
    for (const Case& c : cases) {
      CAPTURE(c.text);
      CHECK(actmem::parse_bytes(c.text, "--budget") == c.bytes);
    }
  }

  TEST_CASE("byte sizes: nonsense is an error naming the option and the text") {
    for (const char* bad : {"", "GiB", "-5GiB", "0", "12 parsecs", "1e30", "3..2GB"}) {
      CAPTURE(bad);
      CHECK_THROWS_WITH_AS(actmem::parse_bytes(bad, "--budget"),
                           doctest::Contains("--budget: expected a positive byte size"), actmem::InputError);
    }
  }

  TEST_CASE("byte sizes format in binary units") {
    CHECK(actmem::format_bytes(34359738368) == "32.00 GiB");
    CHECK(actmem::format_bytes(1536 * 1024) == "1.50 MiB");
    CHECK(actmem::format_bytes(17) == "17 B");
  }

  TEST_CASE("suggestions: a close typo is suggested, an unrelated word is not") {
    const std::vector<std::string> names{"graphcast", "graphcast-small", "graphcast-operational"};
    CHECK(actmem::closest_name("grapcast", names) == "graphcast");
    CHECK(actmem::closest_name("graphcast-smal", names) == "graphcast-small");
    CHECK_FALSE(actmem::closest_name("resnet", names).has_value());
    CHECK(actmem::did_you_mean("tpu-v3", {"tpu-v4", "a100-80gb"}) == " (did you mean 'tpu-v4'?)");
  }
}

// Hostile JSON: every file and document goes through one bounded reader
// (src/json_text.h) and one field reader (src/json_fields.h), so that no
// input crashes, exhausts the stack, or ends as anything but an InputError
// that names the source and the JSON pointer.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "actmem/actmem.h"
#include "actmem/util/limits.h"
#include "test_models.h"
#include "util/json_fields.h"
#include "util/json_text.h"

using namespace actmem;

namespace {

// A temporary file removed at the end of the test.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& text)
      : path(std::filesystem::temp_directory_path() /
             ("actmem-json-test-" + std::to_string(reinterpret_cast<std::uintptr_t>(this)) + ".json")) {
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

std::string nested(char open, char close, std::size_t depth, const std::string& inside = "") {
  return std::string(depth, open) + inside + std::string(depth, close);
}

}  // namespace

TEST_SUITE("json input") {
  TEST_CASE("json: nesting beyond kMaxJsonDepth is an error, however deep (was SIGSEGV at 100,000)") {
    CHECK_THROWS_WITH_AS(detail::parse_json(nested('[', ']', 100000), "deep.json"),
                         doctest::Contains("arrays and objects nested more than 64 levels deep"), InputError);
    std::string objects;
    for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
    CHECK_THROWS_WITH_AS(detail::parse_json(objects, "deep.json"), doctest::Contains("deep.json: /a/a/a/"), InputError);
    CHECK(detail::parse_json(nested('[', ']', kMaxJsonDepth), "ok.json").is_array());
    // Through every reader: a model, a device and a plan file.
    const TempFile deep(nested('[', ']', 100000));
    CHECK_THROWS_AS(load_model(deep.path.string()), InputError);
    CHECK_THROWS_AS(load_device(deep.path.string()), InputError);
    CHECK_THROWS_AS(read_plan_document(deep.path.string()), InputError);
  }

  TEST_CASE("json: a number beyond float64 is an error naming its field (was exit 3, internal error)") {
    CHECK_THROWS_WITH_AS(detail::parse_json(R"({"grid_nodes": 1e400})", "m.json"),
                         "m.json: /grid_nodes: number out of range: 1e400", InputError);
    CHECK_THROWS_WITH_AS(detail::parse_json(R"({"run": {"a/b": [1, -1e999]}})", "p.json"),
                         "p.json: /run/a~1b/1: number out of range: -1e999", InputError);
    CHECK_THROWS_WITH_AS(detail::parse_json("1e400", "n.json"), "n.json: number out of range: 1e400", InputError);
    // Integers beyond 64 bits become floats, then range errors.
    nlohmann::json m = testing::tiny_model_json();
    m["grid_nodes"] = detail::parse_json("123456789012345678901234567890", "x");
    CHECK_THROWS_WITH_AS(model_from_json(m, "m.json"),
                         doctest::Contains("m.json: /grid_nodes: expected a positive integer of at most"), InputError);
    m["grid_nodes"] = 1e300;
    CHECK_THROWS_AS(model_from_json(m, "m.json"), InputError);
  }

  TEST_CASE("json: syntax errors name the line and column") {
    CHECK_THROWS_WITH_AS(detail::parse_json("{\"name\": \"broken\",\n  \"grid_nodes\": 12,,\n}\n", "b.json"),
                         "b.json:2:20: invalid JSON: syntax error while parsing object key - unexpected ','; "
                         "expected string literal",
                         InputError);
    CHECK_THROWS_AS(detail::parse_json("[1] 2", "t.json"), InputError);
    CHECK_THROWS_AS(detail::parse_json("\"\xff\"", "u.json"), InputError);
  }

  TEST_CASE("json: a document of more than kMaxJsonValues values is refused as it is read (was 1 GB for 16 MiB)") {
    // The root, the array and `n` empty objects.
    const auto with_objects = [](std::int64_t n) {
      std::string text = "{\"checkpoints\": [{}";
      for (std::int64_t i = 1; i < n; ++i) text += ",{}";
      return text + "]}";
    };
    CHECK(detail::parse_json(with_objects(kMaxJsonValues - 2), "p.json").at("checkpoints").size() ==
          kMaxJsonValues - 2);
    CHECK_THROWS_WITH_AS(detail::parse_json(with_objects(kMaxJsonValues - 1), "p.json"),
                         "p.json: /checkpoints/65534: more than 65536 values in one document; actmem's documents "
                         "hold far fewer",
                         InputError);
  }

  TEST_CASE("json: a file name holding a NUL byte names no file (was read up to the NUL)") {
    const TempFile file(testing::tiny_model_json().dump());
    const std::string cut = file.path.string() + std::string(1, '\0') + "ignored";
    CHECK(detail::names_regular_file(file.path.string()));
    CHECK_FALSE(detail::names_regular_file(cut));
    CHECK_THROWS_AS(load_model(cut), InputError);
    CHECK_THROWS_WITH_AS(detail::read_json_file(cut), doctest::Contains("expected a file name without NUL bytes"),
                         InputError);
  }

  TEST_CASE("json: a model's description is free text, nothing else (was any JSON value)") {
    nlohmann::json m = testing::tiny_model_json();
    m["description"] = "a tiny test model";
    CHECK(model_from_json(m, "m.json").name == "tiny");
    m["description"] = nlohmann::json::array({1, 2});
    CHECK_THROWS_WITH_AS(model_from_json(m, "m.json"), doctest::Contains("m.json: /description: expected a string"),
                         InputError);
  }

  TEST_CASE("json: a file larger than kMaxJsonFileBytes is refused before it is parsed") {
    const TempFile big(std::string(static_cast<std::size_t>(kMaxJsonFileBytes) + 1, ' '));
    CHECK_THROWS_WITH_AS(load_model(big.path.string()), doctest::Contains("file larger than 16 MiB"), InputError);
  }

  TEST_CASE("json: a plan's model fingerprint of the wrong type is an error naming it (was exit 3)") {
    nlohmann::json model = testing::tiny_model_json();
    model["fingerprint"] = 5;
    CHECK_THROWS_WITH_AS(
        plan_document_from_json({{"model", model}, {"checkpoints", nlohmann::json::array()}}, "p.json"),
        "p.json: /model/fingerprint: expected a string, got 5", InputError);
  }

  TEST_CASE("json: a geometry that computes an empty edge set is an error naming the count (was SIGSEGV)") {
    nlohmann::json m = testing::tiny_model_json();
    for (const char* key : {"grid_nodes", "mesh_nodes", "mesh_edges", "grid2mesh_edges", "mesh2grid_edges"})
      m.erase(key);
    m["resolution_deg"] = 10.0;
    m["mesh_level"] = 0;  // no vertex of the icosahedron on a grid point
    m["radius_query_fraction"] = 1e-9;
    CHECK_THROWS_WITH_AS(model_from_json(m, "geo.json"),
                         doctest::Contains("geo.json: /grid2mesh_edges: computed as 0 from the geometry"), InputError);
  }

  TEST_CASE("json: what actmem writes about a model reads back (fingerprint and parameter count checked)") {
    const ModelDescription m = testing::tiny_model();
    nlohmann::json j = to_json(m);
    j["fingerprint"] = fingerprint(m);
    j["parameter_count"] = parameter_count(m);
    CHECK(fingerprint(model_from_json(j, "round.json")) == fingerprint(m));
    j["parameter_count"] = parameter_count(m) + 1;
    CHECK_THROWS_WITH_AS(model_from_json(j, "round.json"), doctest::Contains("round.json: /parameter_count: expected"),
                         InputError);
  }

  TEST_CASE("json: names are one printable line, messages quote values in bounded space") {
    nlohmann::json m = testing::tiny_model_json();
    m["name"] = "two\nlines";
    CHECK_THROWS_WITH_AS(model_from_json(m, "m.json"), doctest::Contains("m.json: /name: expected a name"), InputError);
    m["name"] = "evil\u202Eslmt.exe";  // a right-to-left override reached the terminal raw
    CHECK_THROWS_WITH_AS(model_from_json(m, "m.json"), doctest::Contains("m.json: /name: expected a name"), InputError);
    m = testing::tiny_model_json();
    m["latent_size"] = nlohmann::json::array();
    for (int i = 0; i < 100000; ++i) m["latent_size"].push_back(i);
    try {
      model_from_json(m, "m.json");
      FAIL("accepted");
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).size() < 120);
    }
    CHECK(detail::describe(nlohmann::json(std::string(1 << 20, 'x'))).size() == 40);
  }

  TEST_CASE("errors: what() is one printable line of bounded length") {
    CHECK(one_line("a\nb\x1b[31m\x7f") == "a\\x0ab\\x1b[31m\\x7f");
    CHECK(one_line("0.25° × 8 — ok") == "0.25° × 8 — ok");
    CHECK(one_line("\xff\xc3") == "\\xff\\xc3");
    CHECK(one_line("\xc2\x85") == "\\xc2\\x85");  // C1 control (NEL)
    // Line separator, right-to-left override, first-strong isolate: they move text on a terminal.
    CHECK(one_line("a\u2028b\u202Ec\u2068d") == "a\\xe2\\x80\\xa8b\\xe2\\x80\\xaec\\xe2\\x81\\xa8d");
    CHECK(one_line("\u200Bzero-width space stays") == "\u200Bzero-width space stays");
    CHECK(one_line(std::string(100000, 'x')).size() == kMaxMessageBytes);
    CHECK(one_line(std::string(kMaxMessageBytes, 'x')) == std::string(kMaxMessageBytes, 'x'));
    const InputError e("file\nname", "/a", std::string(10000, 'y'));
    CHECK(std::string(e.what()).find('\n') == std::string::npos);
    CHECK(std::string(e.what()).size() <= kMaxMessageBytes);
    // Cut at a whole escape, and stable: found by fuzz_plan (0xff bytes echoed in a plan name).
    const std::string cut = one_line(std::string(1000, '\xff'));
    CHECK(cut.size() <= kMaxMessageBytes);
    CHECK(cut.ends_with("\\xff..."));
    CHECK(one_line(cut) == cut);
  }
}

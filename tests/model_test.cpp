#include <algorithm>

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "actmem/model/model.h"
#include "actmem/util/error.h"

namespace {

nlohmann::json tiny_model() {
  return nlohmann::json{
      {"name", "tiny"},         {"architecture", "graphcast"}, {"grid_nodes", 100},        {"mesh_nodes", 42},
      {"grid2mesh_edges", 300}, {"mesh_edges", 240},           {"mesh2grid_edges", 300},   {"latent_size", 8},
      {"mlp_hidden_layers", 1}, {"processor_steps", 2},        {"grid_input_features", 5}, {"mesh_input_features", 5},
      {"edge_features", 4},     {"output_features", 3}};
}

}  // namespace

TEST_SUITE("model") {
  TEST_CASE("presets: the three published GraphCast configurations load with their counts") {
    const auto g = actmem::load_model("graphcast");
    CHECK(g.grid_nodes == 1038240);
    CHECK(g.mesh_nodes == 40962);
    CHECK(g.mesh_edges == 327660);
    CHECK(g.grid2mesh_edges == 1618746);
    CHECK(g.mesh2grid_edges == 3114720);
    CHECK(g.grid_input_features == 474);
    CHECK(g.output_features == 227);
    const auto op = actmem::load_model("graphcast-operational");
    CHECK(op.grid_input_features == 184);
    CHECK(op.output_features == 83);
    const auto small = actmem::load_model("graphcast-small");
    CHECK(small.grid_nodes == 65160);
    CHECK(small.mesh_nodes == 10242);
    CHECK(small.mesh_edges == 81900);
    CHECK(small.mesh2grid_edges == 195480);
    CHECK(small.grid2mesh_edges > 0);
  }

  TEST_CASE("parameters: counted from the layer structure as in DeepMind's code") {
    CHECK(actmem::parameter_count(actmem::load_model("graphcast")) == 36348131);
    CHECK(actmem::parameter_count(actmem::load_model("graphcast-small")) == 35979347);
  }

  TEST_CASE("model files: every field is validated and errors name the file and the field") {
    struct Case {
      const char* name;
      const char* field;
      nlohmann::json value;
      const char* message;
    };
    const Case cases[] = {
        {"negative count", "grid_nodes", -5, "tiny.json: /grid_nodes: expected a positive integer, got -5"},
        {"zero count", "mesh_edges", 0, "tiny.json: /mesh_edges: expected a positive integer, got 0"},
        {"wrong type", "latent_size", "512", "tiny.json: /latent_size: expected a positive integer, got \"512\""},
        {"fraction", "processor_steps", 2.5, "tiny.json: /processor_steps: expected a positive integer, got 2.5"},
        {"architecture", "architecture", "transformer",
         "tiny.json: /architecture: expected one of \"graphcast\", got \"transformer\""},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      nlohmann::json doc = tiny_model();
      doc[c.field] = c.value;
      CHECK_THROWS_WITH_AS(actmem::model_from_json(doc, "tiny.json"), c.message, actmem::InputError);
    }
  }

  TEST_CASE("model files: a missing field, an unknown field and overflowing sizes are errors") {
    nlohmann::json missing = tiny_model();
    missing.erase("latent_size");
    CHECK_THROWS_WITH_AS(actmem::model_from_json(missing, "tiny.json"),
                         "tiny.json: /latent_size: missing required field", actmem::InputError);

    nlohmann::json no_counts = tiny_model();
    no_counts.erase("grid_nodes");
    CHECK_THROWS_WITH_AS(actmem::model_from_json(no_counts, "tiny.json"),
                         "tiny.json: /grid_nodes: missing required field (give it, or give resolution_deg and "
                         "mesh_level to compute it)",
                         actmem::InputError);

    nlohmann::json typo = tiny_model();
    typo["gird_nodes"] = 3;
    CHECK_THROWS_WITH_AS(actmem::model_from_json(typo, "tiny.json"),
                         "tiny.json: /gird_nodes: unknown field (did you mean 'grid_nodes'?)", actmem::InputError);

    nlohmann::json huge = tiny_model();
    huge["mesh2grid_edges"] = std::int64_t{1} << 40;
    huge["latent_size"] = std::int64_t{1} << 20;
    CHECK_THROWS_WITH_AS(actmem::model_from_json(huge, "tiny.json"),
                         doctest::Contains("tiny.json: /mesh2grid_edges: sizes too large"), actmem::InputError);

    nlohmann::json beyond = tiny_model();
    beyond["grid_nodes"] = 9223372036854775807LL;
    CHECK_THROWS_WITH_AS(actmem::model_from_json(beyond, "tiny.json"),
                         doctest::Contains("tiny.json: /grid_nodes: expected a positive integer of at most"),
                         actmem::InputError);
  }

  TEST_CASE("model files: lat_lon_shape is the grid of resolution_deg when the description is on it") {
    using Shape = std::pair<std::int64_t, std::int64_t>;
    CHECK(actmem::lat_lon_shape(actmem::load_model("graphcast")) == Shape{721, 1440});
    CHECK(actmem::lat_lon_shape(actmem::load_model("graphcast-small")) == Shape{181, 360});
    nlohmann::json j = tiny_model();
    CHECK_FALSE(actmem::lat_lon_shape(actmem::model_from_json(j, "tiny.json")));  // no resolution
    j["resolution_deg"] = 30.0;
    CHECK_FALSE(actmem::lat_lon_shape(actmem::model_from_json(j, "tiny.json")));  // 100 nodes are not 7 x 12
    j["grid_nodes"] = 84;
    CHECK(actmem::lat_lon_shape(actmem::model_from_json(j, "tiny.json")) == Shape{7, 12});
    j["resolution_deg"] = 7.0;  // divides neither 180 nor 360: no grid
    CHECK_FALSE(actmem::lat_lon_shape(actmem::model_from_json(j, "tiny.json")));
  }

  TEST_CASE("model files: counts missing from a file are computed from its geometry") {
    nlohmann::json doc = tiny_model();
    for (const char* key : {"grid_nodes", "mesh_nodes", "mesh_edges", "grid2mesh_edges", "mesh2grid_edges"})
      doc.erase(key);
    doc["resolution_deg"] = 5.0;
    doc["mesh_level"] = 2;
    doc["mesh_edges"] = 1234;  // explicit wins
    const auto m = actmem::model_from_json(doc, "geo.json");
    CHECK(m.grid_nodes == 37 * 72);
    CHECK(m.mesh_nodes == 162);
    CHECK(m.mesh_edges == 1234);
    CHECK(m.mesh2grid_edges == 3 * 37 * 72);
  }

  TEST_CASE("presets: an unknown name suggests the closest preset") {
    CHECK_THROWS_WITH_AS(actmem::load_model("graphcats"), doctest::Contains("(did you mean 'graphcast'?)"),
                         actmem::InputError);
  }

  TEST_CASE("fingerprint: depends on sizes, not on the name, and survives a JSON round trip") {
    auto a = actmem::model_from_json(tiny_model(), "a.json");
    auto b = a;
    b.name = "renamed";
    CHECK(actmem::fingerprint(a) == actmem::fingerprint(b));
    b.latent_size = 16;
    CHECK(actmem::fingerprint(a) != actmem::fingerprint(b));
    CHECK(actmem::fingerprint(actmem::model_from_json(actmem::to_json(a), "round")) == actmem::fingerprint(a));
  }

  TEST_CASE(
      "implementation: deepmind by default, physicsnemo and anemoi read, written back only when not the default") {
    const auto plain = actmem::model_from_json(tiny_model(), "tiny.json");
    CHECK(plain.implementation == actmem::Implementation::deepmind);
    CHECK_FALSE(plain.concat_trick);
    CHECK_FALSE(actmem::to_json(plain).contains("implementation"));
    CHECK_FALSE(actmem::to_json(plain).contains("concat_trick"));

    nlohmann::json doc = tiny_model();
    doc["implementation"] = "physicsnemo";
    doc["concat_trick"] = true;
    const auto pn = actmem::model_from_json(doc, "tiny.json");
    CHECK(pn.implementation == actmem::Implementation::physicsnemo);
    CHECK(pn.concat_trick);
    const nlohmann::json written = actmem::to_json(pn);
    CHECK(written.at("implementation") == "physicsnemo");
    CHECK(written.at("concat_trick") == true);
    const auto again = actmem::model_from_json(written, "round");
    CHECK(again.implementation == pn.implementation);
    CHECK(again.concat_trick == pn.concat_trick);

    doc = tiny_model();
    doc["implementation"] = "anemoi";
    doc["concat_trick"] = false;
    CHECK(actmem::model_from_json(doc, "tiny.json").implementation == actmem::Implementation::anemoi);
    doc["implementation"] = "deepmind";
    CHECK(actmem::model_from_json(doc, "tiny.json").implementation == actmem::Implementation::deepmind);
  }

  TEST_CASE("implementation: an unknown one, a wrong type, or concat_trick without PhysicsNeMo is refused") {
    struct Case {
      const char* name;
      nlohmann::json implementation;
      nlohmann::json concat_trick;
      const char* message;
    };
    const Case cases[] = {
        {"unknown", "pytorch", nullptr,
         "tiny.json: /implementation: expected one of \"deepmind\", \"physicsnemo\", \"anemoi\", got \"pytorch\""},
        {"typo", "anemio", nullptr,
         "tiny.json: /implementation: expected one of \"deepmind\", \"physicsnemo\", \"anemoi\", got \"anemio\" "
         "(did you mean 'anemoi'?)"},
        {"not a string", 2, nullptr, "tiny.json: /implementation: expected a string, got 2"},
        {"concat_trick on deepmind", nullptr, true,
         "tiny.json: /concat_trick: concat_trick is PhysicsNeMo's knob: expected implementation \"physicsnemo\" with "
         "it, got \"deepmind\""},
        {"concat_trick on anemoi", "anemoi", true,
         "tiny.json: /concat_trick: concat_trick is PhysicsNeMo's knob: expected implementation \"physicsnemo\" with "
         "it, got \"anemoi\""},
        {"concat_trick not a boolean", "physicsnemo", "yes",
         "tiny.json: /concat_trick: expected true or false, got \"yes\""},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      nlohmann::json doc = tiny_model();
      if (!c.implementation.is_null()) doc["implementation"] = c.implementation;
      if (!c.concat_trick.is_null()) doc["concat_trick"] = c.concat_trick;
      CHECK_THROWS_WITH_AS(actmem::model_from_json(doc, "tiny.json"), c.message, actmem::InputError);
    }
  }

  TEST_CASE("fingerprint: the implementation counts only where it is not the default") {
    nlohmann::json doc = tiny_model();
    const std::string plain = actmem::fingerprint(actmem::model_from_json(doc, "tiny.json"));
    doc["implementation"] = "deepmind";
    doc["concat_trick"] = false;
    CHECK(actmem::fingerprint(actmem::model_from_json(doc, "tiny.json")) == plain);  // old plan files still load
    std::vector<std::string> seen{plain};
    for (const char* implementation : {"physicsnemo", "anemoi"}) {
      doc["implementation"] = implementation;
      seen.push_back(actmem::fingerprint(actmem::model_from_json(doc, "tiny.json")));
    }
    doc["implementation"] = "physicsnemo";
    doc["concat_trick"] = true;
    seen.push_back(actmem::fingerprint(actmem::model_from_json(doc, "tiny.json")));
    std::sort(seen.begin(), seen.end());
    CHECK(std::unique(seen.begin(), seen.end()) == seen.end());
    const auto trick = actmem::model_from_json(doc, "tiny.json");
    CHECK(actmem::fingerprint(actmem::model_from_json(actmem::to_json(trick), "round")) == actmem::fingerprint(trick));
  }

  TEST_CASE("parameters: per implementation, the layers its code builds") {
    // L = 8, one hidden layer: an MLP(L -> L) with LayerNorm has 2 (L^2 + L) + 2 L parameters.
    const std::int64_t L = 8, mlp_l = 2 * (L * L + L) + 2 * L;
    nlohmann::json doc = tiny_model();
    const std::int64_t deepmind = actmem::parameter_count(actmem::model_from_json(doc, "tiny.json"));
    doc["implementation"] = "physicsnemo";
    // No decoder mesh-node MLP (DeepMind's discarded one).
    CHECK(actmem::parameter_count(actmem::model_from_json(doc, "tiny.json")) == deepmind - mlp_l);
    doc["concat_trick"] = true;  // the first layer split per input: the same weights
    CHECK(actmem::parameter_count(actmem::model_from_json(doc, "tiny.json")) == deepmind - mlp_l);
    doc["implementation"] = "anemoi";
    doc.erase("concat_trick");
    // Neither, and no grid-node MLP of its own in the encoder.
    CHECK(actmem::parameter_count(actmem::model_from_json(doc, "tiny.json")) == deepmind - 2 * mlp_l);
  }
}

// The scheduler API of actmem.h: fits() and plan documents in memory.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "actmem/actmem.h"
#include "actmem/plan/builtin_plans.h"
#include "test_models.h"

using namespace actmem;

namespace {

struct Setup {
  CostGraph graph = CostGraph::build(testing::tiny_model(6), RunOptions{});
  Device device = load_device("a100-40gb");
};

}  // namespace

TEST_SUITE("api") {
  TEST_CASE("api: fits() is the solver's answer, re-simulated, and not fitting is a result") {
    // PyTorch: no compiler rematerialisation, so one byte short of the least
    // peak does not fit (under JAX, XLA's own may still get it under).
    RunOptions run;
    run.framework = Framework::pytorch;
    const Setup s{CostGraph::build(testing::tiny_model(6), run)};
    const Solution least = minimum_memory(s.graph, s.device);
    struct Case {
      const char* name;
      std::int64_t budget_bytes;
      bool fits;
    };
    const Case cases[] = {{"whole device", s.device.memory_bytes, true},
                          {"exactly the least peak", least.min_peak_bytes, true},
                          {"one byte short", least.min_peak_bytes - 1, false}};
    for (const Case& c : cases) {
      CAPTURE(c.name);
      const FitAnswer a = fits(s.graph, s.device, c.budget_bytes);
      CHECK(a.fits == c.fits);
      CHECK(a.budget_bytes == c.budget_bytes);
      CHECK(a.min_peak_bytes == least.min_peak_bytes);
      CHECK(a.peak_bytes == a.report.peak_bytes);
      CHECK(a.report.fits == c.fits);
      CHECK(a.peak_bytes >= a.min_peak_bytes);
      const Report again = simulate(s.graph, s.device, c.budget_bytes, a.plan);
      CHECK(to_json(again) == to_json(a.report));
      if (!c.fits) CHECK(a.peak_bytes == a.min_peak_bytes);
    }
    CHECK(to_json(fits(s.graph, s.device).report) == to_json(fits(s.graph, s.device, s.device.memory_bytes).report));
  }

  TEST_CASE("api: every built-in plan survives plan_to_document and plan_from_document") {
    const Setup s;
    for (const std::string name : {"none", "every:2", "deepmind:3"}) {
      CAPTURE(name);
      const Plan plan = builtin_plan(name, s.graph.chain());
      const nlohmann::json document = plan_to_document(s.graph, s.device, s.device.memory_bytes, plan);
      CHECK(document["format"] == "actmem.plan");
      CHECK(document["predicted"] == to_json(simulate(s.graph, s.device, s.device.memory_bytes, plan)));
      CHECK(document.contains("exports"));
      CHECK(plan_from_document(document, s.graph, "doc") == plan);
      // Through text too, as a scheduler would store it.
      CHECK(plan_from_document(nlohmann::json::parse(document.dump()), s.graph, "doc") == plan);
    }
  }

  TEST_CASE("api: a partial plan document with only checkpoints is enough") {
    const Setup s;
    const nlohmann::json partial{{"checkpoints", {{{"from", "processor.0"}, {"to", "processor.2"}}}},
                                 {"edge_blocks", {{"encoder", 4}}}};
    const Plan plan = plan_from_document(partial, s.graph, "partial");
    REQUIRE(plan.checkpoints.size() == 1);
    CHECK(plan.checkpoints[0].from == 2);
    CHECK(plan.checkpoints[0].to == 4);
    CHECK(plan.edge_blocks[0] == 4);
  }

  TEST_CASE("api: bad plan documents are InputErrors naming the source and the field") {
    const Setup s;
    const nlohmann::json good =
        plan_to_document(s.graph, s.device, s.device.memory_bytes, empty_plan(s.graph.stages()));
    struct Case {
      const char* name;
      nlohmann::json document;
      std::string field;
      std::string what;  // "": only the field is checked
    };
    nlohmann::json other_model = good;
    other_model["model"] = to_json(testing::tiny_model(5));
    nlohmann::json edited = good;
    edited["model"]["grid_nodes"] = 2001;
    nlohmann::json wrong_format = good;
    wrong_format["format"] = "other";
    nlohmann::json unknown_stage = good;
    unknown_stage["checkpoints"] = {{{"from", "processor.9"}, {"to", "decoder"}}};
    nlohmann::json bad_model = good;
    bad_model["model"]["latent_size"] = -1;
    const Case cases[] = {
        {"not an object", nlohmann::json::array(), "", "doc: expected a JSON object, got []"},
        {"no checkpoints", nlohmann::json::object(), "/checkpoints", "doc: /checkpoints: missing required field"},
        {"wrong format", wrong_format, "/format", "doc: /format: expected \"actmem.plan\", got \"other\""},
        {"edited model", edited, "/model/fingerprint", ""},
        {"other model", other_model, "/model/fingerprint", ""},
        {"unknown stage", unknown_stage, "/checkpoints/0/from", ""},
        {"bad model field", bad_model, "/model/latent_size", ""},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      try {
        plan_from_document(c.document, s.graph, "doc");
        FAIL("no error");
      } catch (const InputError& e) {
        CHECK(e.source() == "doc");
        CHECK(e.field() == c.field);
        if (!c.what.empty()) CHECK(std::string{e.what()} == c.what);
      }
    }
  }
}

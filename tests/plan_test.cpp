#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "actmem/plan/builtin_plans.h"
#include "actmem/plan/plan_document.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/simulator.h"
#include "actmem/util/error.h"
#include "test_models.h"

using namespace actmem;

namespace {

const CostGraph& tiny_graph() {
  static const CostGraph g = CostGraph::build(testing::tiny_model(), RunOptions{});
  return g;
}

Plan parse(const char* text) { return plan_from_json(nlohmann::json::parse(text), tiny_graph().chain(), "p.json"); }

}  // namespace

TEST_SUITE("plan") {
  TEST_CASE("plans: regions, nesting and blocks parse and print back") {
    const Plan p = parse(R"({"checkpoints": [{"from": "processor.0", "to": "processor.3",
                              "inner": [{"from": "processor.2", "to": "processor.3"}]},
                             {"from": "encoder", "to": "encoder"}],
                             "edge_blocks": {"encoder": 7, "processor.1": 3}})");
    REQUIRE(p.checkpoints.size() == 2);
    CHECK(p.checkpoints[0] == Region{0, 0, {}});  // sorted by position
    CHECK(p.checkpoints[1].inner.size() == 1);
    CHECK(p.edge_blocks[0] == 7);
    CHECK(p.edge_blocks[3] == 3);
    const nlohmann::json back = plan_to_json(p, tiny_graph().stages());
    CHECK(plan_from_json(back, tiny_graph().chain(), "back") == p);
    const Plan offloaded = parse(R"({"checkpoints": [], "step_checkpoint": true, "host_offload": true})");
    CHECK(offloaded.host_offload);
    const nlohmann::json written = plan_to_json(offloaded, tiny_graph().stages());
    CHECK(written.at("host_offload") == true);
    CHECK(plan_from_json(written, tiny_graph().chain(), "back") == offloaded);
    CHECK_FALSE(plan_to_json(p, tiny_graph().stages()).contains("host_offload"));
  }

  TEST_CASE("plans: bad regions and blocks are errors naming the field") {
    struct Case {
      const char* name;
      const char* text;
      const char* message;
    };
    const Case cases[] = {
        {"unknown stage", R"({"checkpoints": [{"from": "procesor.1", "to": "decoder"}]})",
         "p.json: /checkpoints/0/from: unknown stage 'procesor.1' (did you mean 'processor.1'?); stages are encoder, "
         "mesh_edge_embed, processor.0..processor.3, decoder"},
        {"overlap",
         R"({"checkpoints": [{"from": "encoder", "to": "processor.1"}, {"from": "processor.0", "to": "decoder"}]})",
         "p.json: /checkpoints/1: region processor.0..decoder overlaps region encoder..processor.1"},
        {"backwards", R"({"checkpoints": [{"from": "decoder", "to": "encoder"}]})",
         "p.json: /checkpoints/0: region runs backwards: 'decoder' comes after 'encoder'"},
        {"inner outside",
         R"({"checkpoints": [{"from": "processor.0", "to": "processor.1", "inner": [{"from": "processor.1", "to": "processor.2"}]}]})",
         "p.json: /checkpoints/0/inner/0: inner region processor.1..processor.2 lies outside its enclosing region "
         "processor.0..processor.1"},
        {"zero blocks", R"({"checkpoints": [], "edge_blocks": {"encoder": 0}})",
         "p.json: /edge_blocks/encoder: expected a positive integer, got 0"},
        {"too many blocks", R"({"checkpoints": [], "edge_blocks": {"encoder": 3001}})",
         "p.json: /edge_blocks/encoder: expected a positive integer of at most 1024 (actmem's limit on edge blocks), "
         "got 3001"},
        {"no edge update", R"({"checkpoints": [], "edge_blocks": {"mesh_edge_embed": 2}})",
         "p.json: /edge_blocks/mesh_edge_embed: stage has no edge update to block (only encoder, "
         "processor.0..processor.3, decoder have one)"},
        {"not a list", R"({"checkpoints": {"from": "encoder"}})",
         "p.json: /checkpoints: expected a list of regions, got {\"from\":\"encoder\"}"},
        {"missing to", R"({"checkpoints": [{"from": "encoder"}]})",
         "p.json: /checkpoints/0/to: missing required field"},
        {"offload without step checkpoints", R"({"checkpoints": [], "host_offload": true})",
         "p.json: /host_offload: expected only with \"step_checkpoint\": true (what is offloaded is what each "
         "step's checkpoint keeps)"},
        {"offload not a boolean", R"({"checkpoints": [], "step_checkpoint": true, "host_offload": "yes"})",
         "p.json: /host_offload: expected true or false, got \"yes\""},
    };
    for (const Case& c : cases) {
      CAPTURE(c.name);
      CHECK_THROWS_WITH_AS(parse(c.text), c.message, InputError);
    }
  }

  TEST_CASE("plans: built-in plans have the documented shape") {
    const auto& stages = tiny_graph().stages();
    const auto chain = tiny_graph().chain();
    CHECK(builtin_plan("none", chain).checkpoints.empty());
    CHECK(builtin_plan("full", chain).checkpoints.size() == stages.size());
    const Plan every = builtin_plan("every:3", chain);
    REQUIRE(every.checkpoints.size() == 2);
    CHECK(every.checkpoints[0] == Region{2, 4, {}});
    CHECK(every.checkpoints[1] == Region{5, 5, {}});
    const Plan dm = builtin_plan("deepmind:5", chain);
    CHECK(dm.edge_blocks.front() == 5);
    CHECK(dm.edge_blocks.back() == 5);
    CHECK(dm.checkpoints.front() == Region{0, 0, {}});
    CHECK(dm.checkpoints.back() == Region{6, 6, {}});
    // Block counts stop at a stage's edge rows (GraphCast's rule before the
    // chain was the builder's: min(B, edges)); a stage without an edge
    // update gets 1 whatever B is.
    const std::vector<Stage> small{{"encoder", StageRole::encoder, 3},
                                   {"processor.0", StageRole::processor, 10},
                                   {"decoder", StageRole::decoder, 0}};
    const Plan capped = builtin_plan("deepmind:8", small);
    CHECK(capped.edge_blocks == std::vector<std::int64_t>{3, 1, 1});
    CHECK(capped.checkpoints == std::vector<Region>{{0, 0, {}}, {1, 1, {}}, {2, 2, {}}});
    CHECK_THROWS_WITH_AS(builtin_plan("every:0", chain),
                         "plan: expected every:N with N an integer from 1 to 16, got 'every:0'", InputError);
    CHECK_THROWS_AS(builtin_plan("sometimes", chain), InputError);
  }

  TEST_CASE("plan documents: a plan for another model is refused") {
    PlanDocument d;
    d.model = testing::tiny_model(3);
    d.plan = nlohmann::json{{"checkpoints", nlohmann::json::array()}};
    d.source = "other.json";
    CHECK_THROWS_WITH_AS(plan_for(d, tiny_graph()),
                         doctest::Contains("other.json: /model/fingerprint: plan was made for model"), InputError);
  }
}

// Trainer exports: each trainer's keys in its own nesting, the plan the
// trainer really runs with them (read from its source, docs/trainer-exports.md),
// and a prediction that is the simulation of that plan.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/plan/builtin_plans.h"
#include "actmem/plan/exports.h"
#include "actmem/simulate/simulator.h"
#include "plan/trainer_knobs.h"
#include "test_models.h"

using namespace actmem;

namespace {

CostGraph graph(std::int64_t rollout = 1, std::int64_t processor_steps = 4) {
  RunOptions run;
  run.framework = Framework::pytorch;
  run.rollout = rollout;
  return CostGraph::build(testing::tiny_model(processor_steps), run);
}

Device roomy() { return device_with_memory(std::int64_t{1} << 40); }

nlohmann::json exports_for(const CostGraph& g, const Plan& plan, std::int64_t budget) {
  const Device d = roomy();
  return trainer_exports(g, d, budget, plan, simulate(g, d, budget, plan));
}

// The step as the export's trainer runs it: the model in the trainer's
// implementation (the export names it; the plain plan exports run `g`).
CostGraph trainer_graph(const CostGraph& g, const nlohmann::json& e) {
  if (!e.contains("implementation")) return CostGraph::build(g.model(), g.run());
  nlohmann::json model = to_json(g.model());
  model["implementation"] = e.at("implementation");
  return CostGraph::build(model_from_json(model, "export"), g.run());
}

Plan parse(const CostGraph& g, const nlohmann::json& plan) { return plan_from_json(plan, g.chain(), "export"); }

// The plan from the stage names of a plan file.
Plan plan_of(const CostGraph& g, const char* text) { return parse(g, nlohmann::json::parse(text)); }

}  // namespace

TEST_SUITE("exports") {
  TEST_CASE("every export's predicted is the simulation of the plan the trainer runs, on its own implementation") {
    for (std::int64_t rollout : {1, 3}) {
      const CostGraph g = graph(rollout);
      const Plan plan = builtin_plan("deepmind:4", g.chain());
      const std::int64_t budget = simulate(g, roomy(), roomy().memory_bytes, plan).peak_bytes;
      const nlohmann::json exports = exports_for(g, plan, budget);
      for (const std::string& name : trainer_export_names()) {
        CAPTURE(name);
        CAPTURE(rollout);
        const nlohmann::json& e = exports.at(name);
        const CostGraph trainer = trainer_graph(g, e);
        const Report r = simulate(trainer, roomy(), budget, parse(g, e.at("plan")));
        CHECK(e.at("predicted").at("peak_bytes").get<std::int64_t>() == r.peak_bytes);
        CHECK(e.at("predicted").at("fits").get<bool>() == r.fits);
        CHECK(!e.at("snippet").get<std::string>().empty());
        // exact means: the trainer runs the plan itself.
        CHECK(e.at("exact").get<bool>() == (parse(g, e.at("plan")) == plan));
      }
      CHECK(exports.at("pytorch").at("exact").get<bool>());
      CHECK(exports.at("physicsnemo").at("implementation") == "physicsnemo");
      CHECK(exports.at("anemoi").at("implementation") == "anemoi");
      CHECK(exports.at("deepmind").at("implementation") == "deepmind");
      CHECK(exports.at("deepmind_deep_gnn").at("implementation") == "deepmind");
      // The trainers' own op sequences keep less than DeepMind's reference
      // (no aggregation sources): their predictions are not the plan's.
      CHECK(exports.at("anemoi").at("predicted").at("peak_bytes").get<std::int64_t>() !=
            simulate(g, roomy(), budget, parse(g, exports.at("anemoi").at("plan"))).peak_bytes);
      // DeepMind's hand plan blocks the mapper edges: anemoi's GNN mappers cannot.
      CHECK_FALSE(exports.at("anemoi").at("exact").get<bool>());
      CHECK_FALSE(exports.at("physicsnemo").at("exact").get<bool>());
    }
  }

  TEST_CASE("anemoi: per-component keys nested under model, no edge blocks, mesh edges in processor chunk 0") {
    const CostGraph g = graph();
    for (const detail::KnobSetting& s : detail::anemoi_settings(g)) {
      CHECK_FALSE(s.config.contains("gradient_checkpointing"));
      for (const char* part : {"encoder", "processor", "decoder"}) {
        CHECK(s.config.at("model").at(part).contains("gradient_checkpointing"));
        CHECK(s.config.at("model").at(part).contains("num_chunks"));
      }
      CHECK(s.config["model"]["encoder"]["num_chunks"] == 1);
      CHECK(s.config["model"]["decoder"]["num_chunks"] == 1);
      for (std::int64_t b : s.plan.edge_blocks) CHECK(b == 1);
      if (s.config["model"]["processor"]["gradient_checkpointing"].get<bool>()) {
        bool chunk0 = false;
        for (const Region& r : s.plan.checkpoints) chunk0 = chunk0 || (r.from == detail::mesh_edge_embed_stage());
        CHECK(chunk0);
      }
    }
    // A plan anemoi can run is one of its settings: its processor in 2 chunks of 2 layers.
    const Plan expressible = plan_of(g, R"({"checkpoints": [{"from": "encoder", "to": "encoder"},
        {"from": "mesh_edge_embed", "to": "processor.1"}, {"from": "processor.2", "to": "processor.3"},
        {"from": "decoder", "to": "decoder"}]})");
    int found = 0;
    for (const detail::KnobSetting& s : detail::anemoi_settings(g)) {
      if (!(s.plan == expressible)) continue;
      ++found;
      CHECK(s.config["model"]["processor"]["num_chunks"] == 2);
      CHECK(detail::yaml_snippet(s.config).starts_with("model:\n  decoder:\n    gradient_checkpointing: true\n"));
    }
    CHECK(found == 1);
    // Exported for a budget it alone meets among anemoi's settings: exact.
    const std::int64_t budget = simulate(g, roomy(), roomy().memory_bytes, expressible).peak_bytes;
    const nlohmann::json e = exports_for(g, expressible, budget).at("anemoi");
    CHECK(e.at("predicted").at("peak_bytes").get<std::int64_t>() <= budget);
  }

  TEST_CASE("anemoi: edge chunks under one mapper checkpoint are not sold as blocks") {
    // The plan actmem would pick with blocked decoder edges is cheaper than
    // anything anemoi's model=gnn runs: its export is not exact and its
    // prediction is above the plan's.
    const CostGraph g = graph();
    const Plan blocked = plan_of(g, R"({"checkpoints": [{"from": "decoder", "to": "decoder"}],
                                        "edge_blocks": {"decoder": 8}})");
    const Plan whole = plan_of(g, R"({"checkpoints": [{"from": "decoder", "to": "decoder"}]})");
    const std::int64_t budget = simulate(g, roomy(), roomy().memory_bytes, blocked).peak_bytes;
    REQUIRE(budget < simulate(g, roomy(), roomy().memory_bytes, whole).peak_bytes);
    const nlohmann::json e = exports_for(g, blocked, budget).at("anemoi");
    CHECK_FALSE(e.at("exact").get<bool>());
    CHECK(e.at("plan").value("edge_blocks", nlohmann::json::object()).empty());
  }

  TEST_CASE("physicsnemo: one-step keys at rollout 1, fine-tuning keys that one GPU and DDP read alike") {
    const CostGraph one = graph(1, 6);
    for (const detail::KnobSetting& s : detail::physicsnemo_settings(one)) {
      CHECK_FALSE(s.config.contains("checkpoint_encoder_finetune"));
      if (s.config["checkpoint_encoder"].get<bool>() && !s.config["force_single_checkpoint"].get<bool>())
        CHECK(s.plan.checkpoints.front() == Region{0, detail::first_processor_stage(), {}});
    }
    const CostGraph four = graph(4, 6);
    for (const detail::KnobSetting& s : detail::physicsnemo_settings(four)) {
      CHECK(s.config.contains("checkpoint_encoder_finetune"));
      CHECK(s.config.contains("force_single_checkpoint_finetune"));
      CHECK(s.config["checkpoint_processor_finetune"] == false);
      CHECK(s.config["checkpoint_decoder_finetune"] == false);
      if (s.config["force_single_checkpoint_finetune"].get<bool>()) {
        // Alone: nested non-reentrant checkpoints are not what actmem's nested regions simulate.
        CHECK(s.plan.checkpoints == std::vector<Region>{Region{0, detail::decoder_stage(four), {}}});
        CHECK(s.config["checkpoint_encoder_finetune"] == false);
      }
    }
    // segments of whole layers: 6 layers, 4 inner ones = 8 modules: 1, 2, 4 segments.
    int with_segments = 0;
    for (const detail::KnobSetting& s : detail::physicsnemo_settings(one))
      if (s.config["checkpoint_processor"].get<bool>() && !s.config["force_single_checkpoint"].get<bool>() &&
          !s.config["checkpoint_encoder"].get<bool>() && !s.config["checkpoint_decoder"].get<bool>()) {
        ++with_segments;
        const int segments = s.config["segments"].get<int>();
        CHECK((segments == 1 || segments == 2 || segments == 4));
        CHECK(static_cast<int>(s.plan.checkpoints.size()) == segments);
      }
    CHECK(with_segments == 3);
  }

  TEST_CASE("deepmind: GraphCast's one knob is the step remat, DeepGNN's are per GNN") {
    const CostGraph one = graph(1);
    for (const detail::KnobSetting& s : detail::deepmind_graphcast_settings(one)) CHECK_FALSE(s.plan.step_checkpoint);
    const CostGraph four = graph(4);
    const auto settings = detail::deepmind_graphcast_settings(four);
    REQUIRE(settings.size() == 2);
    CHECK(settings[1].config["gradient_checkpointing"] == true);
    CHECK(settings[1].plan.step_checkpoint);
    CHECK(settings[1].plan.checkpoints.empty());

    const Plan none = empty_plan(four.stages());
    Plan stepped = none;
    stepped.step_checkpoint = true;
    const std::int64_t budget = simulate(four, roomy(), roomy().memory_bytes, stepped).peak_bytes;
    REQUIRE(budget < simulate(four, roomy(), roomy().memory_bytes, none).peak_bytes);
    const nlohmann::json e = exports_for(four, stepped, budget).at("deepmind");
    CHECK(e.at("exact").get<bool>());
    CHECK(e.at("snippet") == "predictor = autoregressive.Predictor(predictor, gradient_checkpointing=True)\n");

    for (const detail::KnobSetting& s : detail::deep_gnn_settings(one, edges_per_stage(one.chain()))) {
      CHECK(s.config.contains("remat_mesh_to_grid_gnn"));
      CHECK(s.config.at("mesh_to_grid_model_ctor").at("deep_gnn_kwargs").contains("edge_update_remat_block_size"));
      CHECK(s.config.at("mesh_model_ctor").at("deep_gnn_kwargs").contains("remat_block_size"));
      CHECK_FALSE(s.config.contains("remat_block_size"));
    }
  }

  TEST_CASE("deepmind: edges per block reproduce actmem's block count and largest block") {
    CHECK(detail::deepmind_edge_block_size(10, 4) == 3);  // 3 3 3 1: 4 blocks, largest 3 = ceil(10/4)
    CHECK(detail::deepmind_edge_block_size(9, 4) == 0);   // size 3 makes 3 blocks
    CHECK(detail::deepmind_edge_block_size(1618746, 8) == 202344);
    CHECK(detail::deepmind_edge_block_size(5, 1) == 0);
    CHECK(detail::deepmind_edge_block_size(5, 6) == 0);
  }

  TEST_CASE("snippets: YAML nests mappings, Python writes None/True and dict()") {
    CHECK(detail::yaml_snippet({{"model", {{"encoder", {{"num_chunks", 1}}}}}}) ==
          "model:\n  encoder:\n    num_chunks: 1\n");
    CHECK(detail::yaml_snippet({{"a", nullptr}, {"b", false}}) == "a: null\nb: false\n");
    CHECK(detail::python_snippet({{"a", nullptr}, {"b", {{"c", true}}}}) == "a = None\nb = dict(c=True)\n");
  }
}

TEST_SUITE("exports") {
  TEST_CASE("physicsnemo: concat_trick is the model's, set in the export and simulated") {
    RunOptions run;
    run.framework = Framework::pytorch;
    for (bool trick : {false, true}) {
      CAPTURE(trick);
      const CostGraph g = CostGraph::build(testing::tiny_model(4, Implementation::physicsnemo, trick), run);
      const Plan plan = empty_plan(g.stages());
      const std::int64_t budget = simulate(g, roomy(), roomy().memory_bytes, plan).peak_bytes;
      const nlohmann::json e = exports_for(g, plan, budget).at("physicsnemo");
      CHECK(e.at("config").at("concat_trick").get<bool>() == trick);
      CHECK(e.at("predicted").at("peak_bytes").get<std::int64_t>() ==
            simulate(g, roomy(), budget, parse(g, e.at("plan"))).peak_bytes);
    }
    // Any other model goes to PhysicsNeMo without the trick, and says so.
    const CostGraph deepmind = graph();
    const Plan plan = empty_plan(deepmind.stages());
    const nlohmann::json e = exports_for(deepmind, plan, std::int64_t{1} << 40).at("physicsnemo");
    CHECK_FALSE(e.at("config").at("concat_trick").get<bool>());
  }

  TEST_CASE("exports: a trainer that cannot train the model says why (was exit 3: 1 or 2 processor steps)") {
    for (std::int64_t steps : {1, 2, 3}) {
      CAPTURE(steps);
      const CostGraph g = graph(1, steps);
      const Plan plan = empty_plan(g.stages());
      const nlohmann::json exports = exports_for(g, plan, roomy().memory_bytes);
      const nlohmann::json& physicsnemo = exports.at("physicsnemo");
      CHECK(physicsnemo.contains("unsupported") == (steps < 3));
      CHECK(physicsnemo.contains("predicted") == (steps >= 3));
      CHECK(physicsnemo.at("exact") == (steps >= 3 && physicsnemo.at("exact").get<bool>()));
      if (steps < 3)
        CHECK(physicsnemo.at("unsupported") ==
              fmt::format("PhysicsNeMo's GraphCastNet needs at least 3 processor layers (it raises \"Expected at "
                          "least 3 processor layers\"); this model has {} processor steps",
                          steps));
      for (const char* other : {"pytorch", "jax", "anemoi", "deepmind", "deepmind_deep_gnn"})
        CHECK(exports.at(other).contains("predicted"));
    }
  }
}

// What actmem accepts (actmem/util/limits.h, docs/reliability.md): sizes whose
// byte totals could overflow, budgets above the device, devices whose
// speeds make times infinite, and inputs whose answer would take unbounded
// time or memory are refused as InputErrors naming the option or field;
// everything up to a limit is answered with sound figures.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include "actmem/actmem.h"
#include "actmem/plan/builtin_plans.h"
#include "actmem/util/limits.h"
#include "test_models.h"

using namespace actmem;

namespace {

RunOptions run_of(std::int64_t batch, std::int64_t rollout, DType dtype = DType::bfloat16,
                  Framework framework = Framework::jax) {
  RunOptions run;
  run.batch = batch;
  run.rollout = rollout;
  run.dtype = dtype;
  run.framework = framework;
  return run;
}

// A model with huge sets and a short op chain: its steps near kMaxStepBytes
// build and simulate in milliseconds.
ModelDescription huge_model() {
  nlohmann::json m = testing::tiny_model_json(1);
  m["grid_nodes"] = std::int64_t{1} << 30;
  m["mesh_nodes"] = std::int64_t{1} << 28;
  m["grid2mesh_edges"] = std::int64_t{1} << 31;
  m["mesh_edges"] = std::int64_t{1} << 31;
  m["mesh2grid_edges"] = std::int64_t{3} << 30;
  return model_from_json(m, "huge.json");
}

// The largest batch whose step CostGraph::build accepts (by bisection).
std::int64_t largest_batch(const ModelDescription& m, DType dtype, Framework framework) {
  std::int64_t lo = 1, hi = kMaxBatch;
  while (lo < hi) {
    const std::int64_t mid = (lo + hi + 1) / 2;
    try {
      CostGraph::build(m, run_of(mid, 1, dtype, framework));
      lo = mid;
    } catch (const InputError&) {
      hi = mid - 1;
    }
  }
  return lo;
}

Device device_json(const char* field, double value) {
  nlohmann::json d{
      {"id", "mine"}, {"memory_bytes", 1 << 30}, {"peak_fp32_flops", 1e12}, {"bandwidth_bytes_per_s", 1e11}};
  d[field] = value;
  return device_from_json(d, "d.json", "");
}

}  // namespace

TEST_SUITE("limits") {
  TEST_CASE("limits: a step whose byte totals would overflow int64 is refused, naming the batch") {
    // Was "FITS: predicted peak -8530903002.58 GiB" (UBSan: signed overflow).
    const ModelDescription graphcast = load_model("graphcast");
    CHECK_THROWS_WITH_AS(CostGraph::build(graphcast, run_of(65536, 8, DType::float32, Framework::pytorch)),
                         doctest::Contains("batch: the training step is too large to plan: the tensors of model "
                                           "'graphcast' at batch 65536, rollout 8, float32 exceed 2^56 bytes"),
                         InputError);
    CHECK_THROWS_WITH_AS(CostGraph::build(graphcast, run_of(65536, 1024, DType::float32, Framework::pytorch)),
                         doctest::Contains("batch: the training step is too large to plan"), InputError);
  }

  TEST_CASE("limits: at the largest accepted step every figure is sound (run under UBSan in CI)") {
    for (const Framework framework : {Framework::pytorch, Framework::jax}) {
      CAPTURE(to_string(framework));
      const ModelDescription m = huge_model();
      const std::int64_t batch = largest_batch(m, DType::float32, framework);
      CHECK(batch > 1);
      CHECK(batch < kMaxBatch);
      const CostGraph g = CostGraph::build(m, run_of(batch, 1, DType::float32, framework));
      std::int64_t tensor_bytes = 0;
      for (const Tensor& t : g.tensors()) tensor_bytes += t.bytes();
      CHECK(tensor_bytes <= kMaxStepBytes);
      CHECK(tensor_bytes > kMaxStepBytes / 2);
      const Device device = device_with_memory(kMaxDeviceBytes);
      for (const char* plan : {"none", "full", "deepmind:1024"}) {
        CAPTURE(plan);
        const Report r = simulate(g, device, device.memory_bytes, builtin_plan(plan, g.chain()));
        CHECK(r.breakdown.inputs > 0);
        CHECK(r.peak_bytes > r.breakdown.inputs + r.breakdown.activations);
        CHECK(r.peak_bytes == r.breakdown.total());
        CHECK(r.peak_bytes <= 64 * kMaxStepBytes);
        CHECK(r.step_time_s > 0);
      }
      const Solution s = minimum_memory(g, device);
      CHECK(s.min_peak_bytes > 0);
      CHECK(s.min_peak_bytes == s.report.peak_bytes);
    }
  }

  TEST_CASE("limits: a budget above the device's memory is refused") {
    // Was "fits" at 369 GiB on a 32 GiB TPU v4 with --budget 1TiB.
    const Device tpu = load_device("tpu-v4");
    CHECK(budget_within(tpu, tpu.memory_bytes, "--budget") == tpu.memory_bytes);
    CHECK_THROWS_WITH_AS(budget_within(tpu, std::int64_t{1} << 40, "--budget"),
                         doctest::Contains("--budget: expected a budget from 1 B to the memory of tpu-v4 (32.00 GiB), "
                                           "got 1024.00 GiB"),
                         InputError);
    const CostGraph g = CostGraph::build(testing::tiny_model(), RunOptions{});
    CHECK_THROWS_WITH_AS(fits(g, tpu, tpu.memory_bytes + 1), doctest::Contains("budget: expected a budget"),
                         InputError);
    CHECK_THROWS_AS(device_with_memory(kMaxDeviceBytes + 1), InputError);
    // simulate() judges fits against the budget it is given: never above the device.
    CHECK_THROWS_WITH_AS(simulate(g, tpu, tpu.memory_bytes + 1, empty_plan(g.stages())),
                         doctest::Contains("budget: expected a budget from 1 B to the memory of tpu-v4"), InputError);
    CHECK_THROWS_AS(simulate(g, tpu, 0, empty_plan(g.stages())), InputError);
  }

  TEST_CASE("limits: a plan document's budget is checked against the device it is applied to, named or not") {
    // Was "peak 84.78 GiB of 4194304.00 GiB budget: fits" for a plan file
    // holding a budget and no device (simulate --plan on the default device).
    const Device tpu = load_device("tpu-v4");
    const auto document = [](nlohmann::json extra) {
      nlohmann::json d{{"checkpoints", nlohmann::json::array()}};
      d.update(extra);
      return plan_document_from_json(d, "b.json");
    };
    const PlanDocument without_device = document({{"budget_bytes", std::int64_t{1} << 52}});
    CHECK_THROWS_WITH_AS(without_device.budget_on(tpu),
                         "b.json: /budget_bytes: expected at most the memory_bytes of the device it is applied to "
                         "(tpu-v4: 34359738368), got 4503599627370496",
                         InputError);
    CHECK(document({{"budget_bytes", 1000}}).budget_on(tpu) == 1000);
    CHECK(document(nlohmann::json::object()).budget_on(tpu) == tpu.memory_bytes);
    CHECK_THROWS_WITH_AS(document({{"budget_bytes", tpu.memory_bytes + 1}, {"device", to_json(tpu)}}),
                         doctest::Contains("b.json: /budget_bytes: expected at most the memory_bytes"), InputError);
  }

  TEST_CASE("limits: device speeds that would make a time infinite or NaN are refused") {
    // Was "step time -nan" and an arbitrary plan with a bandwidth of 5e-324.
    CHECK_THROWS_WITH_AS(device_json("bandwidth_bytes_per_s", 5e-324),
                         "d.json: /bandwidth_bytes_per_s: expected a number from 1e+06 to 1e+21, got 5e-324",
                         InputError);
    CHECK_THROWS_AS(device_json("peak_fp32_flops", 1e300), InputError);
    CHECK_THROWS_AS(device_json("peak_bf16_flops", 0.5), InputError);
    const Device slowest = device_json("bandwidth_bytes_per_s", kMinDeviceRate);
    const CostGraph g = CostGraph::build(testing::tiny_model(), RunOptions{});
    const Report r = simulate(g, slowest, slowest.memory_bytes, empty_plan(g.stages()));
    CHECK(std::isfinite(r.step_time_s));
    CHECK(r.step_time_s > 0);
  }

  TEST_CASE("limits: processor steps beyond the solver's reach in seconds are refused") {
    // 256 steps took 396 s and 6.7 GiB; 4096 (then accepted) did not finish.
    nlohmann::json m = testing::tiny_model_json(kMaxProcessorSteps);
    CHECK(model_from_json(m, "m.json").processor_steps == kMaxProcessorSteps);
    m["processor_steps"] = 256;
    CHECK_THROWS_WITH_AS(model_from_json(m, "m.json"),
                         doctest::Contains("m.json: /processor_steps: expected a positive integer of at most"),
                         InputError);
  }

  TEST_CASE("limits: a step of more than kMaxStepOps ops is refused as it is built, naming the rollout") {
    const ModelDescription graphcast = load_model("graphcast");
    const std::size_t per_step = CostGraph::build(graphcast, run_of(1, 1)).ops().size();
    const auto fitting = static_cast<std::int64_t>(static_cast<std::size_t>(kMaxStepOps) / (per_step + 1));
    CHECK(static_cast<std::int64_t>(CostGraph::build(graphcast, run_of(1, fitting)).ops().size()) <= kMaxStepOps);
    CHECK_THROWS_WITH_AS(CostGraph::build(graphcast, run_of(1, kMaxRollout)),
                         doctest::Contains("rollout: the training step is too large to plan: model 'graphcast' at "
                                           "rollout 1024 has more than 131072 ops"),
                         InputError);
  }

  TEST_CASE("limits: built-in plan parameters are parsed exactly, never wrapped") {
    // every:4294967296 looped adding regions until memory ran out;
    // every:4294967297 silently became every:1.
    const CostGraph g = CostGraph::build(testing::tiny_model(), RunOptions{});
    for (const char* name : {"every:4294967296", "every:4294967297", "every:99999999999999999999", "every:-1",
                             "every:+2", "every:0x2", "deepmind:1025", "deepmind:"}) {
      CAPTURE(name);
      CHECK_THROWS_AS(builtin_plan(name, g.chain()), InputError);
    }
    CHECK(builtin_plan("every:16", g.chain()).checkpoints == std::vector<Region>{{2, 5, {}}});
    CHECK(builtin_plan("deepmind:1024", g.chain()).edge_blocks.front() == 1024);
  }

  TEST_CASE("limits: plans made in code are checked by simulate(), as documents are") {
    const CostGraph g = CostGraph::build(testing::tiny_model(), RunOptions{});
    const Device device = load_device("a100-80gb");
    const auto rejects = [&](const Plan& p, const char* message) {
      CHECK_THROWS_WITH_AS(simulate(g, device, device.memory_bytes, p), doctest::Contains(message), InputError);
    };
    Plan p = empty_plan(g.stages());
    p.edge_blocks[0] = kMaxEdgeBlocks + 1;
    rejects(p, "plan: /edge_blocks/encoder: expected a block count from 1 to 1024");
    p = empty_plan(g.stages());
    p.edge_blocks[1] = 2;  // mesh_edge_embed has no edge update
    rejects(p, "plan: /edge_blocks/mesh_edge_embed");
    p = empty_plan(g.stages());
    p.checkpoints = {{3, 4, {}}, {2, 2, {}}};  // unsorted
    rejects(p, "plan: /checkpoints/1: expected a region within stages");
    p.checkpoints = {{0, 99, {}}};
    rejects(p, "plan: /checkpoints/0");
    p.checkpoints = {{0, 6, {}}};
    for (int depth = 1; depth <= kMaxRegionDepth; ++depth) {
      Region* r = &p.checkpoints.front();
      while (!r->inner.empty()) r = &r->inner.front();
      r->inner = {{2, 4, {}}};
    }
    rejects(p, "regions nested more than 16 levels deep");
    p.edge_blocks.pop_back();
    rejects(p, "plan: /edge_blocks: expected one block count per stage");
  }

  TEST_CASE("limits: regions nest at most kMaxRegionDepth levels in plan documents") {
    const CostGraph g = CostGraph::build(testing::tiny_model(), RunOptions{});
    const auto nested = [](int depth) {
      nlohmann::json regions = nlohmann::json::array();
      for (int d = 0; d < depth; ++d) {
        nlohmann::json r{{"from", "processor.0"}, {"to", "processor.1"}};
        if (!regions.empty()) r["inner"] = regions;
        regions = nlohmann::json::array({r});
      }
      return nlohmann::json{{"checkpoints", regions}};
    };
    CHECK(plan_from_document(nested(kMaxRegionDepth), g, "p.json").checkpoints.size() == 1);
    CHECK_THROWS_WITH_AS(plan_from_document(nested(kMaxRegionDepth + 1), g, "p.json"),
                         doctest::Contains("regions nested more than 16 levels deep"), InputError);
  }

  TEST_CASE("limits: a timeline of more than kMaxTimelineRows rows is refused, naming --timeline") {
    // A 0.5 KB plan with the largest edge_blocks took 12-13 GiB with --timeline.
    const CostGraph g = CostGraph::build(testing::tiny_model(), run_of(1, 12));
    const Device device = load_device("a100-80gb");
    const Plan plan = builtin_plan("deepmind:1024", g.chain());
    SimulationOptions options;
    options.record_timeline = true;
    CHECK_THROWS_WITH_AS(simulate(g, device, device.memory_bytes, plan, options),
                         doctest::Contains("timeline: the timeline would have more than 131072 rows"), InputError);
    CHECK(simulate(g, device, device.memory_bytes, plan).peak_bytes > 0);  // without a timeline: answered
  }
}

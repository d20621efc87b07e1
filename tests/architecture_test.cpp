// The architecture seam: a second architecture is one builder declaring its
// op DAG and its stage chain (names, roles, edge rows). Plans, the
// simulator and the solver read only that declaration, so they work on it
// unchanged. The architecture sketched here is a GenCast-style processor
// without edge updates (a stack of residual MLP blocks on the mesh nodes
// standing in for graph-transformer layers), between an encoder and a
// decoder that have none either.

#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/simulator.h"
#include "actmem/solve/solver.h"
#include "actmem/util/error.h"
#include "test_models.h"

namespace actmem {
namespace {

constexpr int kBlocks = 6;
constexpr std::int64_t kNodes = 40962;  // a refinement-6 mesh
constexpr std::int64_t kWidth = 512;

// encoder (grid features to mesh latents), block.0..block.5 (residual MLP
// blocks), decoder (mesh latents to the prediction), loss.
class MeshTransformerBuilder {
 public:
  explicit MeshTransformerBuilder(const RunOptions& run) : run_(run), b_(testing::tiny_model(2), run, chain()) {}

  static std::vector<Stage> chain() {
    std::vector<Stage> stages{{"encoder", StageRole::encoder, 0}};
    for (int k = 0; k < kBlocks; ++k) stages.push_back({fmt::format("block.{}", k), StageRole::processor, 0});
    stages.push_back({"decoder", StageRole::decoder, 0});
    return stages;
  }

  CostGraph build() {
    const TensorId features = input("features", 64);
    const TensorId target = input("target", 64);
    TensorId h = linear(features, kWidth, 0, "encoder");
    for (int k = 1; k <= kBlocks; ++k) {
      const std::string name = fmt::format("block.{}", k - 1);
      const TensorId up = linear(h, 4 * kWidth, k, name + ".up");
      const TensorId act = unary(OpKind::silu, up, k, name + ".silu");
      const TensorId down = linear(act, kWidth, k, name + ".down");
      h = binary(OpKind::add, h, down, k, name + ".residual", kWidth);
    }
    const TensorId prediction = linear(h, 64, kBlocks + 1, "decoder");
    const TensorId loss = activation("loss", 1, 1, 4);
    Op op;
    op.kind = OpKind::mse_loss;
    op.name = "loss";
    op.stage = kBlocks + 2;
    op.inputs = {prediction, target};
    op.outputs = {loss};
    op.forward_flops = 3.0 * static_cast<double>(kNodes * 64);
    op.backward_flops = 2.0 * static_cast<double>(kNodes * 64);
    b_.add_op(op);
    return b_.finish();
  }

 private:
  TensorId input(const std::string& name, std::int64_t cols) {
    return b_.add_tensor({name, kNodes * run_.batch, cols, 4, TensorRole::input, false});
  }
  TensorId activation(const std::string& name, std::int64_t rows, std::int64_t cols, int bytes) {
    return b_.add_tensor({name, rows, cols, bytes, TensorRole::activation, true});
  }
  TensorId linear(TensorId x, std::int64_t out, int stage, const std::string& name) {
    const std::int64_t in = b_.tensor(x).cols;
    const TensorId w = b_.add_tensor({name + ".weight", out, in, 4, TensorRole::parameter, true});
    const TensorId bias = b_.add_tensor({name + ".bias", 1, out, 4, TensorRole::parameter, true});
    const TensorId y = activation(name + ".out", kNodes * run_.batch, out, 2);
    Op op;
    op.kind = OpKind::linear;
    op.name = name;
    op.stage = stage;
    op.inputs = {x, w, bias};
    op.outputs = {y};
    op.forward_flops = 2.0 * static_cast<double>(kNodes * run_.batch * in * out);
    op.backward_flops = 2 * op.forward_flops;
    b_.add_op(op);
    return y;
  }
  TensorId unary(OpKind kind, TensorId x, int stage, const std::string& name) {
    const TensorId y = activation(name + ".out", b_.tensor(x).rows, b_.tensor(x).cols, 2);
    Op op;
    op.kind = kind;
    op.name = name;
    op.stage = stage;
    op.inputs = {x};
    op.outputs = {y};
    b_.add_op(op);
    return y;
  }
  TensorId binary(OpKind kind, TensorId a, TensorId c, int stage, const std::string& name, std::int64_t cols) {
    const TensorId y = activation(name + ".out", b_.tensor(a).rows, cols, 2);
    Op op;
    op.kind = kind;
    op.name = name;
    op.stage = stage;
    op.inputs = {a, c};
    op.outputs = {y};
    b_.add_op(op);
    return y;
  }

  RunOptions run_;
  CostGraphBuilder b_;
};

CostGraph mesh_transformer(Framework framework) {
  RunOptions run;
  run.framework = framework;
  return MeshTransformerBuilder(run).build();
}

TEST_SUITE("architecture seam") {
  TEST_CASE("architecture seam: the model's architecture selects the builder, an unknown one is refused") {
    CHECK(architecture_names() == std::vector<std::string>{"graphcast"});
    ModelDescription m = testing::tiny_model(2);
    CHECK(CostGraph::build(m, RunOptions{}).stages().front() == "encoder");
    m.architecture = "gencast";
    CHECK_THROWS_WITH_AS(CostGraph::build(m, RunOptions{}),
                         doctest::Contains("/architecture: expected one of \"graphcast\", got \"gencast\""),
                         InputError);
    // The parameter count is the builder's too: none without one.
    CHECK_THROWS_WITH_AS(parameter_count(m),
                         doctest::Contains("/architecture: expected one of \"graphcast\", got \"gencast\""),
                         InputError);
  }

  TEST_CASE("another architecture: built-in plans follow its declared roles") {
    const CostGraph g = mesh_transformer(Framework::jax);
    CHECK(describe_chain(g.chain()) == "encoder, block.0..block.5, decoder");
    const Plan every = builtin_plan("every:2", g.chain());
    CHECK(every.checkpoints == std::vector<Region>{{1, 2, {}}, {3, 4, {}}, {5, 6, {}}});
    const Plan deepmind = builtin_plan("deepmind", g.chain());
    CHECK(deepmind.checkpoints == std::vector<Region>{{0, 0, {}}, {1, 3, {}}, {4, 6, {}}, {7, 7, {}}});
    CHECK(deepmind.edge_blocks == std::vector<std::int64_t>(g.chain().size(), 1));  // nothing to block
    CHECK_THROWS_WITH_AS(
        plan_from_json(nlohmann::json::parse(R"({"checkpoints": [], "edge_blocks": {"block.0": 2}})"), g.chain(), "p"),
        "p: /edge_blocks/block.0: stage has no edge update to block (no stage of this model has one)", InputError);
  }

  TEST_CASE("another architecture: simulated and solved with no change outside its builder") {
    for (Framework framework : {Framework::jax, Framework::pytorch}) {
      CAPTURE(to_string(framework));
      const CostGraph g = mesh_transformer(framework);
      const Device device = load_device("a100-40gb");
      const Report none = simulate(g, device, device.memory_bytes, builtin_plan("none", g.chain()));
      const Report full = simulate(g, device, device.memory_bytes, builtin_plan("full", g.chain()));
      const Report every = simulate(g, device, device.memory_bytes, builtin_plan("every:2", g.chain()));
      // Checkpoints trade memory for recomputation, as on GraphCast.
      CHECK(full.peak_bytes < none.peak_bytes);
      CHECK(every.peak_bytes < none.peak_bytes);
      CHECK(full.forward_flops + full.recompute_flops > none.forward_flops + none.recompute_flops);
      // The solver's least-memory plan is at most any built-in plan's peak,
      // and its answer is the simulator's.
      const Solution least = minimum_memory(g, device);
      CHECK(least.min_peak_bytes <= full.peak_bytes);
      CHECK(least.min_peak_bytes <= every.peak_bytes);
      CHECK(simulate(g, device, device.memory_bytes, least.plan).peak_bytes == least.report.peak_bytes);
      // A budget between the least and the plan-free peak is met by a
      // plan faster than the least-memory one or equal to it.
      const std::int64_t budget = (least.min_peak_bytes + none.peak_bytes) / 2;
      const Solution s = solve(g, device, budget);
      CHECK(s.feasible);
      CHECK(s.report.peak_bytes <= budget);
      CHECK(s.report.step_time_s <= least.report.step_time_s);
    }
  }
}

}  // namespace
}  // namespace actmem

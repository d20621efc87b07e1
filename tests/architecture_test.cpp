// The architecture seam: a second architecture is one builder declaring its
// op DAG and its stage chain (names, roles, edge rows), its parameter count
// and the fields its model files add, registered with
// register_architecture(). Model files select it by name, and the readers,
// plans, the simulator and the solver work on it unchanged. The
// architecture sketched here is a GenCast-style processor without edge
// updates: a stack of transformer blocks on the mesh nodes, each an
// attention over a window of keys per node (q·kᵀ, softmax, the values
// mixed by the weights: a stand-in for a graph transformer's attention
// over the mesh edges) and an MLP whose hidden width is its own field
// `mlp_expansion` times the latent size, each with a residual; between an
// encoder and a decoder that have no edge updates either.

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/plan/builtin_plans.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/simulator.h"
#include "actmem/solve/solver.h"
#include "actmem/util/error.h"
#include "test_models.h"

namespace actmem {
namespace {

// encoder (grid features to mesh latents), block.0..block.{K-1}
// (transformer blocks, K = processor_steps), decoder (mesh latents to the
// prediction), loss; every tensor has a row per mesh node.
class MeshTransformerBuilder {
 public:
  MeshTransformerBuilder(const ModelDescription& model, const RunOptions& run)
      : model_(model),
        run_(run),
        rows_(model.mesh_nodes * run.batch),
        hidden_(model.architecture_fields.at("mlp_expansion") * model.latent_size),
        b_(model, run, chain(model)) {}

  static std::vector<Stage> chain(const ModelDescription& model) {
    std::vector<Stage> stages{{"encoder", StageRole::encoder, 0}};
    for (int k = 0; k < model.processor_steps; ++k)
      stages.push_back({fmt::format("block.{}", k), StageRole::processor, 0});
    stages.push_back({"decoder", StageRole::decoder, 0});
    return stages;
  }

  // Keys each node's attention weighs.
  static constexpr std::int64_t kWindow = 16;

  // What build() declares: the weights and biases of its linears.
  static std::int64_t parameter_count(const ModelDescription& m) {
    const std::int64_t w = m.latent_size, hidden = m.architecture_fields.at("mlp_expansion") * w;
    return (m.grid_input_features + 1) * w +
           m.processor_steps * (3 * (w + 1) * w + (w + 1) * hidden + (hidden + 1) * w) + (w + 1) * m.output_features;
  }

  CostGraph build() {
    const TensorId features = input("features", model_.grid_input_features);
    const TensorId target = input("target", model_.output_features);
    TensorId h = linear(features, model_.latent_size, 0, "encoder");
    for (int k = 1; k <= model_.processor_steps; ++k) {
      const std::string name = fmt::format("block.{}", k - 1);
      const TensorId q = linear(h, model_.latent_size, k, name + ".q");
      const TensorId keys = linear(h, model_.latent_size, k, name + ".k");
      const TensorId values = linear(h, model_.latent_size, k, name + ".v");
      const TensorId scores = product(q, keys, kWindow, k, name + ".scores");
      const TensorId weights = unary(OpKind::softmax, scores, k, name + ".softmax");
      const TensorId mixed = product(weights, values, model_.latent_size, k, name + ".mix");
      h = binary(OpKind::add, h, mixed, k, name + ".attention_residual", model_.latent_size);
      const TensorId up = linear(h, hidden_, k, name + ".up");
      const TensorId act = unary(OpKind::silu, up, k, name + ".silu");
      const TensorId down = linear(act, model_.latent_size, k, name + ".down");
      h = binary(OpKind::add, h, down, k, name + ".residual", model_.latent_size);
    }
    const int decoder = static_cast<int>(model_.processor_steps) + 1;
    const TensorId prediction = linear(h, model_.output_features, decoder, "decoder");
    const TensorId loss = activation("loss", 1, 1, 4);
    Op op;
    op.kind = OpKind::mse_loss;
    op.name = "loss";
    op.stage = decoder + 1;
    op.inputs = {prediction, target};
    op.outputs = {loss};
    op.forward_flops = 3.0 * static_cast<double>(rows_ * model_.output_features);
    op.backward_flops = 2.0 * static_cast<double>(rows_ * model_.output_features);
    b_.add_op(op);
    return b_.finish();
  }

 private:
  TensorId input(const std::string& name, std::int64_t cols) {
    return b_.add_tensor({name, rows_, cols, 4, TensorRole::input, false});
  }
  TensorId activation(const std::string& name, std::int64_t rows, std::int64_t cols, int bytes) {
    return b_.add_tensor({name, rows, cols, bytes, TensorRole::activation, true});
  }
  TensorId linear(TensorId x, std::int64_t out, int stage, const std::string& name) {
    const std::int64_t in = b_.tensor(x).cols;
    const TensorId w = b_.add_tensor({name + ".weight", out, in, 4, TensorRole::parameter, true});
    const TensorId bias = b_.add_tensor({name + ".bias", 1, out, 4, TensorRole::parameter, true});
    const TensorId y = activation(name + ".out", rows_, out, 2);
    Op op;
    op.kind = OpKind::linear;
    op.name = name;
    op.stage = stage;
    op.inputs = {x, w, bias};
    op.outputs = {y};
    op.forward_flops = 2.0 * static_cast<double>(rows_ * in * out);
    op.backward_flops = 2 * op.forward_flops;
    b_.add_op(op);
    return y;
  }
  // a·b of two activations, `cols` wide (each row's product with its
  // window: the operands' inner width is theirs).
  TensorId product(TensorId a, TensorId c, std::int64_t cols, int stage, const std::string& name) {
    const TensorId y = activation(name + ".out", rows_, cols, 2);
    Op op;
    op.kind = OpKind::matmul;
    op.name = name;
    op.stage = stage;
    op.inputs = {a, c};
    op.outputs = {y};
    op.forward_flops = 2.0 * static_cast<double>(rows_ * b_.tensor(a).cols * cols);
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

  const ModelDescription& model_;
  RunOptions run_;
  std::int64_t rows_;
  std::int64_t hidden_;
  CostGraphBuilder b_;
};

Architecture mesh_transformer_architecture() {
  return {"mesh-transformer",
          {{"mlp_expansion", 16, "a block's MLP hidden width over the latent size"}},
          [](const ModelDescription& m, const RunOptions& run) { return MeshTransformerBuilder(m, run).build(); },
          MeshTransformerBuilder::parameter_count};
}

// Registered once per process, whichever test case runs first.
void register_mesh_transformer() {
  static std::once_flag once;
  std::call_once(once, [] { register_architecture(mesh_transformer_architecture()); });
}

// A model file of the architecture: the shared fields (its counts of grid2mesh,
// mesh and mesh2grid edges unused) and its own.
nlohmann::json mesh_transformer_json() {
  nlohmann::json j = testing::tiny_model_json(6);
  j["name"] = "mesh-transformer";
  j["architecture"] = "mesh-transformer";
  j["mesh_nodes"] = 40962;  // a refinement-6 mesh
  j["latent_size"] = 512;
  j["grid_input_features"] = 64;
  j["output_features"] = 64;
  j["mlp_expansion"] = 4;
  return j;
}

CostGraph mesh_transformer(Framework framework) {
  register_mesh_transformer();
  RunOptions run;
  run.framework = framework;
  return CostGraph::build(model_from_json(mesh_transformer_json(), "mt.json"), run);
}

TEST_SUITE("architecture seam") {
  TEST_CASE("architecture seam: the model's architecture selects the builder, an unknown one is refused") {
    CHECK(architecture_names().front() == "graphcast");
    CHECK(architecture_fields("graphcast").empty());
    ModelDescription m = testing::tiny_model(2);
    CHECK(CostGraph::build(m, RunOptions{}).stages().front() == "encoder");
    m.architecture = "gencast";
    // The list names GraphCast first, then any architecture registered in
    // this process (the mesh transformer, when another case ran first).
    CHECK_THROWS_WITH_AS(CostGraph::build(m, RunOptions{}),
                         doctest::Contains("/architecture: expected one of \"graphcast\""), InputError);
    CHECK_THROWS_WITH_AS(CostGraph::build(m, RunOptions{}), doctest::Contains("got \"gencast\""), InputError);
    // The parameter count is the builder's too: none without one.
    CHECK_THROWS_WITH_AS(parameter_count(m), doctest::Contains("/architecture: expected one of \"graphcast\""),
                         InputError);
    CHECK_THROWS_WITH_AS(parameter_count(m), doctest::Contains("got \"gencast\""), InputError);
  }

  TEST_CASE("another architecture: registered once, with fields that are its own") {
    register_mesh_transformer();
    const std::vector<std::string> names = architecture_names();
    CHECK(std::find(names.begin(), names.end(), "mesh-transformer") != names.end());
    CHECK(architecture_fields("mesh-transformer").front().key == "mlp_expansion");
    CHECK_THROWS_WITH_AS(register_architecture(mesh_transformer_architecture()),
                         "architecture: \"mesh-transformer\" is already an architecture", InputError);
    Architecture bad = mesh_transformer_architecture();
    bad.name = "other";
    bad.fields.push_back({"latent_size", 4, "a second latent size"});
    CHECK_THROWS_WITH_AS(register_architecture(bad),
                         "architecture: \"other\": field \"latent_size\" is one every model description shares",
                         InputError);
    bad.fields = {{"heads", 8, ""}, {"heads", 8, ""}};
    CHECK_THROWS_WITH_AS(register_architecture(bad), "architecture: \"other\": field \"heads\" is declared twice",
                         InputError);
    bad.fields = {};
    bad.build = nullptr;
    CHECK_THROWS_WITH_AS(register_architecture(bad),
                         "architecture: \"other\": expected a builder and a parameter count", InputError);
    const std::vector<std::string> after = architecture_names();
    CHECK(std::find(after.begin(), after.end(), "other") == after.end());
  }

  TEST_CASE("another architecture: its model files carry its fields, checked as the shared ones are") {
    register_mesh_transformer();
    const ModelDescription m = model_from_json(mesh_transformer_json(), "mt.json");
    CHECK(m.architecture_fields == std::map<std::string, std::int64_t>{{"mlp_expansion", 4}});
    CHECK(to_json(m)["mlp_expansion"] == 4);
    CHECK(model_from_json(to_json(m), "again.json").architecture_fields == m.architecture_fields);
    CHECK(parameter_count(m) == CostGraph::build(m, RunOptions{}).parameter_count());
    // The field is part of the model: another expansion is another model.
    nlohmann::json wider = mesh_transformer_json();
    wider["mlp_expansion"] = 8;
    CHECK(fingerprint(model_from_json(wider, "mt.json")) != fingerprint(m));
    CHECK(fingerprint(testing::tiny_model(2)) == fingerprint(model_from_json(testing::tiny_model_json(2), "t.json")));

    nlohmann::json missing = mesh_transformer_json();
    missing.erase("mlp_expansion");
    CHECK_THROWS_WITH_AS(model_from_json(missing, "mt.json"), "mt.json: /mlp_expansion: missing required field",
                         InputError);
    wider["mlp_expansion"] = 17;
    CHECK_THROWS_WITH_AS(model_from_json(wider, "mt.json"), doctest::Contains("mt.json: /mlp_expansion:"), InputError);
    nlohmann::json graphcast = testing::tiny_model_json(2);
    graphcast["mlp_expansion"] = 4;  // not a field of GraphCast's
    CHECK_THROWS_WITH_AS(model_from_json(graphcast, "g.json"), doctest::Contains("g.json: /mlp_expansion:"),
                         InputError);
    // A description made in code is held to the same fields.
    ModelDescription without = m;
    without.architecture_fields.clear();
    CHECK_THROWS_WITH_AS(CostGraph::build(without, RunOptions{}),
                         "mesh-transformer: /mlp_expansion: architecture \"mesh-transformer\" expects mlp_expansion "
                         "from 1 to 16 (a block's MLP hidden width over the latent size)",
                         InputError);
    ModelDescription extra = testing::tiny_model(2);
    extra.architecture_fields["heads"] = 8;
    CHECK_THROWS_WITH_AS(parameter_count(extra), "tiny: /heads: not a field of architecture \"graphcast\"", InputError);
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

  TEST_CASE("another architecture: its attention keeps what the derivatives read") {
    // After PyTorch's forward pass with nothing checkpointed, the live
    // activations are what each op keeps for its backward, counted here
    // from the derivatives alone: a linear's and SiLU's input, both of a
    // product's operands (each one's gradient reads the other), softmax's
    // output (its gradient is y ⊙ (dy − Σ y·dy)), the loss's prediction,
    // and the loss itself, a prediction-sized buffer in PyTorch.
    const CostGraph g = mesh_transformer(Framework::pytorch);
    std::vector<TensorId> kept;
    auto keep = [&](TensorId t) {
      if (g.tensor(t).role == TensorRole::activation && std::find(kept.begin(), kept.end(), t) == kept.end())
        kept.push_back(t);
    };
    int products = 0, softmaxes = 0;
    std::int64_t loss_bytes = 0;
    for (const Op& op : g.ops()) {
      switch (op.kind) {
        case OpKind::linear:
        case OpKind::silu: keep(op.inputs[0]); break;
        case OpKind::matmul:
          keep(op.inputs[0]);
          keep(op.inputs[1]);
          ++products;
          break;
        case OpKind::softmax:
          keep(op.outputs[0]);
          ++softmaxes;
          break;
        case OpKind::mse_loss:
          keep(op.inputs[0]);
          loss_bytes = g.tensor(op.inputs[0]).bytes();
          break;
        default: break;
      }
    }
    REQUIRE(products == 2 * 6);
    REQUIRE(softmaxes == 6);
    std::int64_t expected = loss_bytes;
    for (TensorId t : kept) expected += g.tensor(t).bytes();
    const Device device = load_device("a100-80gb");
    const Report none = simulate(g, device, device.memory_bytes, builtin_plan("none", g.chain()));
    CHECK(none.activation_bytes_after_forward == expected);

    // Softmax's output outlives the product that also keeps it: from that
    // product's backward to softmax's the live activations lose the values
    // alone (the product's other operand), not the weights.
    SimulationOptions timeline;
    timeline.record_timeline = true;
    const Report traced = simulate(g, device, device.memory_bytes, builtin_plan("none", g.chain()), timeline);
    auto activations_at = [&](const std::string& op) {
      for (const TimelinePoint& p : traced.timeline)
        if (p.at.pass == Pass::backward && p.at.op == op) return p.live.activations;
      FAIL("no backward sample at ", op);
      return std::int64_t{0};
    };
    const auto mix =
        std::find_if(g.ops().begin(), g.ops().end(), [](const Op& op) { return op.name == "block.0.mix"; });
    REQUIRE(mix != g.ops().end());
    const TensorId values = mix->inputs[1];
    CHECK(activations_at("block.0.mix") - activations_at("block.0.softmax") == g.tensor(values).bytes());
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

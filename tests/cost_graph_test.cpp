#include <doctest/doctest.h>

#include <map>

#include "actmem/cost_graph.h"
#include "test_models.h"

using namespace actmem;

TEST_SUITE("cost graph") {
  TEST_CASE("cost graph: parameters in the graph match the layer-structure count") {
    for (const char* preset : {"graphcast", "graphcast-small", "graphcast-operational"}) {
      CAPTURE(preset);
      const ModelDescription m = load_model(preset);
      CHECK(CostGraph::build(m, RunOptions{}).parameter_count() == parameter_count(m));
    }
  }

  TEST_CASE("cost graph: every op's inputs are produced earlier and stages are contiguous") {
    RunOptions run;
    run.rollout = 3;
    const CostGraph g = CostGraph::build(testing::tiny_model(), run);
    std::vector<bool> produced(g.tensors().size(), false);
    for (std::size_t t = 0; t < g.tensors().size(); ++t)
      produced[t] = g.tensor(static_cast<TensorId>(t)).role != TensorRole::activation;
    int last_stage = -1, last_step = 0;
    for (const Op& op : g.ops()) {
      CAPTURE(op.name);
      for (TensorId t : op.inputs) CHECK(produced[static_cast<std::size_t>(t)]);
      for (TensorId t : op.outputs) produced[static_cast<std::size_t>(t)] = true;
      CHECK((op.step > last_step || (op.step == last_step && op.stage >= last_stage)));
      if (op.step > last_step) last_stage = -1;
      last_step = op.step;
      last_stage = op.stage;
    }
    for (std::size_t t = 0; t < produced.size(); ++t) CHECK(produced[t]);
  }

  TEST_CASE("cost graph: forward FLOPs of the linear layers are 2 x rows x in x out, summed") {
    const ModelDescription m = testing::tiny_model(2);
    const CostGraph g = CostGraph::build(m, RunOptions{});
    double linear_flops = 0;
    for (const Op& op : g.ops())
      if (op.kind == OpKind::linear) linear_flops += op.forward_flops;
    const double L = 64;
    auto mlp = [&](double rows, double in, double out) { return 2 * rows * (in * L + L * out); };
    const double expected = mlp(2000, 20, L) + mlp(500, 20, L) + mlp(3000, 4, L)  // embedders
                            + mlp(3000, 3 * L, L) + mlp(500, 2 * L, L) + mlp(2000, L, L)  // encoder
                            + mlp(3000, 4, L)                                          // mesh edge embed
                            + 2 * (mlp(3000, 3 * L, L) + mlp(500, 2 * L, L))            // processor
                            + mlp(6000, 4, L) + mlp(6000, 3 * L, L) + mlp(2000, 2 * L, L) + mlp(2000, L, 10);
    CHECK(linear_flops == doctest::Approx(expected));
  }

  TEST_CASE("cost graph: stage names follow the design's chain") {
    const CostGraph g = CostGraph::build(testing::tiny_model(3), RunOptions{});
    const std::vector<std::string> expected{"encoder", "mesh_edge_embed", "processor.0", "processor.1", "processor.2",
                                            "decoder"};
    CHECK(g.stages() == expected);
    CHECK(g.stage_name(6) == "loss");
  }

  TEST_CASE("cost graph: batch scales node and edge tensors but not what the batch shares") {
    // PyTorch (integrations/pytorch) shares the index arrays; JAX
    // (integrations/jax) shares every graph input: the static channels,
    // the mesh and edge features and the index arrays.
    for (Framework framework : {Framework::pytorch, Framework::jax}) {
      RunOptions run;
      run.framework = framework;
      const CostGraph one = CostGraph::build(testing::tiny_model(), run);
      run.batch = 3;
      const CostGraph three = CostGraph::build(testing::tiny_model(), run);
      REQUIRE(one.tensors().size() == three.tensors().size());
      for (std::size_t t = 0; t < one.tensors().size(); ++t) {
        const Tensor& a = one.tensor(static_cast<TensorId>(t));
        const Tensor& b = three.tensor(static_cast<TensorId>(t));
        CAPTURE(a.name);
        const bool per_sample_input = framework == Framework::pytorch
                                          ? a.element_bytes != 8
                                          : a.name == "frames" || a.name.starts_with("forcings.") ||
                                                a.name.starts_with("target.");
        const bool shared = a.role == TensorRole::parameter || (a.role == TensorRole::input && !per_sample_input) ||
                            a.name.ends_with("loss");
        CHECK(b.bytes() == (shared ? a.bytes() : 3 * a.bytes()));
      }
    }
  }
}

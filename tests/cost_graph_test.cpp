#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "actmem/cost/cost_graph.h"
#include "test_models.h"

using namespace actmem;

TEST_SUITE("cost graph") {
  TEST_CASE("cost graph: parameters in the graph match the model-level count for every preset and implementation") {
    // parameter_count() counts what the builder declares without building
    // the step; here the whole step is built, and no parameter may be
    // declared outside that declaration. Every preset in every
    // implementation, with one and with three hidden layers per MLP; the
    // graph built as a plan builds it (RunOptions{}: JAX, bfloat16) and under
    // PyTorch in float32 at batch 2, rollout 2: parameters do not depend on
    // how the model is trained.
    RunOptions pytorch;
    pytorch.framework = Framework::pytorch;
    pytorch.dtype = DType::float32;
    pytorch.batch = 2;
    pytorch.rollout = 2;
    for (const std::string& preset : preset_names())
      for (const testing::ImplementationCase& c : testing::kImplementationCases)
        for (std::int64_t hidden_layers : {1, 3}) {
          CAPTURE(preset);
          CAPTURE(c.name);
          CAPTURE(hidden_layers);
          nlohmann::json doc = to_json(load_model(preset));
          doc["implementation"] = to_string(c.implementation);
          doc["concat_trick"] = c.concat_trick;
          doc["mlp_hidden_layers"] = hidden_layers;
          const ModelDescription m = model_from_json(doc, preset + ".json");
          CHECK(CostGraph::build(m, RunOptions{}).parameter_count() == parameter_count(m));
          CHECK(CostGraph::build(m, pytorch).parameter_count() == parameter_count(m));
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
    const double expected = mlp(2000, 20, L) + mlp(500, 20, L) + mlp(3000, 4, L)          // embedders
                            + mlp(3000, 3 * L, L) + mlp(500, 2 * L, L) + mlp(2000, L, L)  // encoder
                            + mlp(3000, 4, L)                                             // mesh edge embed
                            + 2 * (mlp(3000, 3 * L, L) + mlp(500, 2 * L, L))              // processor
                            + mlp(6000, 4, L) + mlp(6000, 3 * L, L) + mlp(2000, 2 * L, L) + mlp(2000, L, 10);
    CHECK(linear_flops == doctest::Approx(expected));
  }

  TEST_CASE("cost graph: stage names follow the design's chain") {
    const CostGraph g = CostGraph::build(testing::tiny_model(3), RunOptions{});
    const std::vector<std::string> expected{"encoder",     "mesh_edge_embed", "processor.0",
                                            "processor.1", "processor.2",     "decoder"};
    CHECK(g.stages() == expected);
    CHECK(g.stage_name(6) == "loss");
  }

  TEST_CASE("cost graph: GraphCast's builder marks each edge update's MLP, part by part, in order") {
    // The memory rules recognise the edge MLP by these marks (OpPart), not
    // by its op kinds: every edge update of a one-hidden-layer model is the
    // seven parts in order; a deeper MLP repeats parts, and PhysicsNeMo's
    // concat trick has no concat, so neither is the pattern.
    const std::vector<OpPart> pattern{
        OpPart::edge_sender_gather, OpPart::edge_receiver_gather, OpPart::edge_input_concat, OpPart::edge_first_linear,
        OpPart::edge_activation,    OpPart::edge_second_linear,   OpPart::edge_norm};
    const CostGraph g = CostGraph::build(testing::tiny_model(3), RunOptions{});
    std::map<int, std::vector<OpPart>> parts;  // per stage, its edge update's
    for (const Op& op : g.ops()) {
      if (op.edge_update) parts[op.stage].push_back(op.part);
      if (!op.edge_update) CHECK(op.part == OpPart::none);
    }
    REQUIRE(parts.size() == 5);  // encoder, processor.0..2, decoder
    for (const auto& [stage, marked] : parts) {
      CAPTURE(stage);
      CHECK(marked == pattern);
    }
    ModelDescription deeper = testing::tiny_model(3);
    deeper.mlp_hidden_layers = 2;
    int linears = 0;
    const CostGraph deep = CostGraph::build(deeper, RunOptions{});
    for (const Op& op : deep.ops())
      if (op.stage == 0 && op.part == OpPart::edge_second_linear) ++linears;
    CHECK(linears == 2);
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
        const bool per_sample_input =
            framework == Framework::pytorch
                ? a.element_bytes != 8
                : a.name == "frames" || a.name.starts_with("forcings.") || a.name.starts_with("target.");
        const bool shared = a.role == TensorRole::parameter || (a.role == TensorRole::input && !per_sample_input) ||
                            a.name.ends_with("loss");
        CHECK(b.bytes() == (shared ? a.bytes() : 3 * a.bytes()));
      }
    }
  }
}

namespace {

// The op of that name (step 0), or nullptr.
const Op* find_op(const CostGraph& g, const std::string& name) {
  for (const Op& op : g.ops())
    if (op.name == name) return &op;
  return nullptr;
}

std::size_t position(const CostGraph& g, const std::string& name) {
  const Op* op = find_op(g, name);
  REQUIRE_MESSAGE(op != nullptr, name);
  return static_cast<std::size_t>(op - g.ops().data());
}

// The producer's name of the aggregation's source (input 2).
std::string aggregated_source(const CostGraph& g, const std::string& stage) {
  const Op* aggregate = find_op(g, stage + ".aggregate");
  REQUIRE_MESSAGE(aggregate != nullptr, stage);
  return g.op(g.producer(aggregate->inputs[2])).name;
}

}  // namespace

TEST_SUITE("cost graph") {
  TEST_CASE("cost graph: every implementation's parameters match its model-level count") {
    for (const testing::ImplementationCase& c : testing::kImplementationCases) {
      CAPTURE(c.name);
      const ModelDescription m = testing::tiny_model(3, c);
      CHECK(CostGraph::build(m, RunOptions{}).parameter_count() == parameter_count(m));
    }
  }

  TEST_CASE("cost graph: DeepMind aggregates the edge MLP's output, its edge residual follows the node update") {
    const CostGraph g = CostGraph::build(testing::tiny_model(2, Implementation::deepmind), RunOptions{});
    CHECK(aggregated_source(g, "encoder") == "encoder.edge_mlp.layer_norm");
    CHECK(aggregated_source(g, "processor.0") == "processor.0.edge_mlp.layer_norm");
    CHECK(aggregated_source(g, "decoder") == "decoder.edge_mlp.layer_norm");
    CHECK(position(g, "processor.0.edge_residual") > position(g, "processor.0.node_residual"));
    CHECK(find_op(g, "encoder.edge_residual") == nullptr);
    CHECK(position(g, "encoder.grid_node_embed.linear0") < position(g, "encoder.edge_embed.linear0"));
    const Op& grid_mlp = *find_op(g, "encoder.grid_node_mlp.linear0");
    CHECK(g.tensor(grid_mlp.inputs[0]).cols == 64);  // v_g [G, L]
  }

  TEST_CASE("cost graph: PhysicsNeMo aggregates the processor's edge latent after its residual, the mappers' without") {
    const CostGraph g = CostGraph::build(testing::tiny_model(2, Implementation::physicsnemo), RunOptions{});
    CHECK(aggregated_source(g, "processor.0") == "processor.0.edge_residual");
    CHECK(position(g, "processor.0.edge_residual") < position(g, "processor.0.aggregate"));
    CHECK(aggregated_source(g, "encoder") == "encoder.edge_mlp.layer_norm");
    CHECK(aggregated_source(g, "decoder") == "decoder.edge_mlp.layer_norm");
    CHECK(find_op(g, "encoder.edge_residual") == nullptr);
    CHECK(find_op(g, "decoder.edge_residual") == nullptr);
    // processor.1 reads processor.0's residual as its edge latent.
    const Op& next = *find_op(g, "processor.1.edge_input");
    CHECK(g.op(g.producer(next.inputs[0])).name == "processor.0.edge_residual");
  }

  TEST_CASE("cost graph: anemoi embeds edges first, adds every edge residual, updates grid nodes on cat[v, v]") {
    const CostGraph g = CostGraph::build(testing::tiny_model(2, Implementation::anemoi), RunOptions{});
    CHECK(position(g, "encoder.edge_embed.linear0") < position(g, "encoder.grid_node_embed.linear0"));
    for (const char* stage : {"encoder", "processor.0", "decoder"}) {
      CAPTURE(stage);
      CHECK(aggregated_source(g, stage) == std::string(stage) + ".edge_residual");
    }
    const Op& input = *find_op(g, "encoder.grid_node_input");
    REQUIRE(input.inputs.size() == 2);
    CHECK(input.inputs[0] == input.inputs[1]);
    CHECK(g.tensor(input.outputs[0]).rows == 2000);
    CHECK(g.tensor(input.outputs[0]).cols == 128);  // [G, 2L]
    const Op& first = *find_op(g, "encoder.grid_node_mlp.linear0");
    CHECK(g.tensor(first.inputs[1]).name == "encoder.mesh_node_mlp.linear0.weight");  // the shared node_mlp
  }

  TEST_CASE("cost graph: concat_trick projects the nodes before gathering and never concatenates [E, 3L]") {
    const CostGraph g = CostGraph::build(testing::tiny_model(2, Implementation::physicsnemo, true), RunOptions{});
    for (const Op& op : g.ops()) {
      CAPTURE(op.name);
      if (op.kind == OpKind::concat) CHECK(g.tensor(op.outputs[0]).cols < 3 * 64);
    }
    // Decoder: senders are mesh nodes (500), receivers grid nodes (2000), 6000 edges.
    const Op& senders = *find_op(g, "decoder.edge_mlp.linear0_senders");
    CHECK(g.tensor(senders.inputs[0]).rows == 500);
    CHECK(g.tensor(senders.outputs[0]).rows == 500);
    CHECK(senders.inputs.size() == 2);  // no bias
    const Op& receivers = *find_op(g, "decoder.edge_mlp.linear0_receivers");
    CHECK(g.tensor(receivers.outputs[0]).rows == 2000);
    CHECK(receivers.inputs.size() == 3);  // the bias, once
    const Op& edges = *find_op(g, "decoder.edge_mlp.linear0_edges");
    CHECK(g.tensor(edges.inputs[0]).rows == 6000);
    CHECK(g.tensor(edges.inputs[0]).cols == 64);
    CHECK_FALSE(senders.edge_update);
    CHECK(edges.edge_update);
    const Op& gathered = *find_op(g, "decoder.gather_senders");
    CHECK(gathered.inputs[0] == senders.outputs[0]);
    CHECK(g.tensor(gathered.outputs[0]).rows == 6000);
    // The edge update stays one contiguous run, ending at the LayerNorm.
    const std::size_t from = position(g, "decoder.edge_mlp.linear0_edges");
    const std::size_t to = position(g, "decoder.edge_mlp.layer_norm");
    for (std::size_t i = from; i <= to; ++i) CHECK(g.ops()[i].edge_update);
    CHECK_FALSE(g.ops()[to + 1].edge_update);
  }
}

TEST_SUITE("cost graph") {
  TEST_CASE("cost graph: PhysicsNeMo's function scopes hold their edge tensors to the function's last op") {
    const CostGraph g = CostGraph::build(testing::tiny_model(2, Implementation::physicsnemo), RunOptions{});
    auto held_by = [&](const std::string& op) {
      std::vector<std::string> names;
      for (TensorId t : find_op(g, op)->releases_held) names.push_back(g.tensor(t).name);
      return names;
    };
    CHECK(held_by("encoder.grid_node_residual") == std::vector<std::string>{"encoder.edge_mlp.layer_norm"});
    CHECK(held_by("decoder.grid_node_residual") == std::vector<std::string>{"decoder.edge_mlp.layer_norm"});
    CHECK(held_by("decoder.output_mlp.linear1") == std::vector<std::string>{"decoder.edge_embed.layer_norm"});
    for (const testing::ImplementationCase& c : testing::kImplementationCases) {
      if (c.implementation == Implementation::physicsnemo) continue;
      CAPTURE(c.name);
      const CostGraph other = CostGraph::build(testing::tiny_model(2, c), RunOptions{});
      for (const Op& op : other.ops()) CHECK(op.releases_held.empty());
    }
  }

  TEST_CASE("cost graph: a hold outside its tensor's stage is refused as a builder bug") {
    CostGraphBuilder b(testing::tiny_model(1), RunOptions{}, {{"a"}, {"b"}});
    const TensorId x = b.add_tensor({"x", 4, 4, 4, TensorRole::input, false});
    const TensorId y = b.add_tensor({"y", 4, 4, 4, TensorRole::activation, true});
    const TensorId z = b.add_tensor({"z", 4, 4, 4, TensorRole::activation, true});
    Op first;
    first.kind = OpKind::silu;
    first.name = "a.silu";
    first.inputs = {x};
    first.outputs = {y};
    b.add_op(first);
    Op second = first;
    second.name = "b.silu";
    second.stage = 1;
    second.inputs = {y};
    second.outputs = {z};
    const OpId at = b.add_op(second);
    b.hold_until(at, y);  // made in stage a, held to stage b
    CHECK_THROWS_WITH_AS(b.finish(), doctest::Contains("op b.silu holds y, not made earlier in its stage"),
                         std::logic_error);
  }

  TEST_CASE("cost graph: under JAX the last processor step adds no edge residual, which nothing reads (J22)") {
    RunOptions run;
    run.framework = Framework::jax;
    const CostGraph jax = CostGraph::build(testing::tiny_model(2), run);
    CHECK(find_op(jax, "processor.0.edge_residual") != nullptr);
    CHECK(find_op(jax, "processor.1.edge_residual") == nullptr);
    run.framework = Framework::pytorch;
    const CostGraph torch = CostGraph::build(testing::tiny_model(2), run);
    CHECK(find_op(torch, "processor.1.edge_residual") != nullptr);  // eager: computed, then let go
    // Nothing else is dead under JAX, in any implementation, at rollout 1 or 2:
    // every op's output is read, or is a step's loss, or the last step's
    // next carry, which the scan's body computes in every iteration.
    for (Implementation implementation :
         {Implementation::deepmind, Implementation::physicsnemo, Implementation::anemoi})
      for (std::int64_t rollout : {1, 2}) {
        RunOptions jax_run;
        jax_run.framework = Framework::jax;
        jax_run.rollout = rollout;
        const CostGraph g = CostGraph::build(testing::tiny_model(2, implementation), jax_run);
        for (const Op& op : g.ops()) {
          CAPTURE(op.name);
          if (op.kind != OpKind::mse_loss && op.kind != OpKind::next_input)
            CHECK_FALSE(g.consumers(op.outputs.front()).empty());
        }
      }
  }

  TEST_CASE("cost graph: under JAX float32 a linear's output gradient, read by matmuls only, is bfloat16 (J21)") {
    // Written by the LayerNorm's or SiLU's backward in bfloat16; SiLU's
    // output gradient is the same buffer. The output MLP's last linear
    // feeds the loss, whose float32 gradient is made with it.
    RunOptions run;
    run.framework = Framework::jax;
    run.dtype = DType::float32;
    const CostGraph g = CostGraph::build(testing::tiny_model(2), run);
    int linears = 0;
    for (const Op& op : g.ops()) {
      if (op.kind != OpKind::linear) continue;
      ++linears;
      CAPTURE(op.name);
      const Tensor& out = g.tensor(op.outputs.front());
      const Op& reader = g.op(g.consumers(op.outputs.front()).front());
      const bool by_matmuls = reader.kind == OpKind::layer_norm || reader.kind == OpKind::silu;
      CHECK(by_matmuls == (op.name != "decoder.output_mlp.linear1"));
      CHECK(out.gradient_bytes() == (by_matmuls ? 2 : 4) * out.rows * out.cols);
      if (reader.kind == OpKind::silu) {
        const Tensor& silu = g.tensor(reader.outputs.front());
        CHECK(silu.gradient_bytes() == 2 * silu.rows * silu.cols);
      }
    }
    CHECK(linears > 20);
  }

  TEST_CASE("cost graph: under JAX float32 the operands only matmuls read are kept in bfloat16 (J13)") {
    // XLA:TPU rounds float32 matmul operands to bfloat16: the gathers
    // (read by the edge MLP's fused concat), the encoder's and decoder's
    // edge embeddings (read by their edge MLP alone) and the edge residual
    // of the processor's second-last step (read by the last step's edge MLP
    // alone: the last step's edge residual is dead, J22) and the decoder's
    // grid residual (read by the output MLP alone) are made in 2 bytes a
    // value, their gradients in 4. The mesh edge embedding and the other
    // residuals, which residual adds read too, stay float32.
    RunOptions run;
    run.framework = Framework::jax;
    run.dtype = DType::float32;
    const CostGraph g = CostGraph::build(testing::tiny_model(2), run);
    std::vector<std::string> narrowed;
    for (const Tensor& t : g.tensors())
      if (t.element_bytes == 2) {
        CHECK(t.gradient_bytes() == 2 * t.bytes());
        narrowed.push_back(t.name);
      }
    const std::vector<std::string> expected{
        "encoder.edge_embed.layer_norm", "encoder.gather_senders",       "encoder.gather_receivers",
        "processor.0.gather_senders",    "processor.0.gather_receivers", "processor.0.edge_residual",
        "processor.1.gather_senders",    "processor.1.gather_receivers", "decoder.edge_embed.layer_norm",
        "decoder.gather_senders",        "decoder.gather_receivers",     "decoder.grid_node_residual"};
    CHECK(narrowed == expected);
    // Not under PyTorch float32 nor JAX bfloat16: every tensor keeps its
    // dtype (at rollout 1 no carried frames, J9).
    run.framework = Framework::pytorch;
    const CostGraph torch_graph = CostGraph::build(testing::tiny_model(2), run);
    const CostGraph jax_bfloat16 = CostGraph::build(testing::tiny_model(2), RunOptions{});
    for (const CostGraph* other : {&torch_graph, &jax_bfloat16})
      CHECK(std::none_of(other->tensors().begin(), other->tensors().end(),
                         [](const Tensor& t) { return t.gradient_element_bytes != 0; }));
  }
  TEST_CASE("cost graph: a JAX rollout carries its frames in float32, whatever the activation dtype (J9)") {
    // The step adds the network's residual to the last input frame in
    // float32 (DeepMind's InputsAndResiduals), so the next carry, which
    // holds that frame and the prediction, stays float32 under bfloat16
    // too, as does its gradient; PyTorch's next grid input is the
    // activation dtype's.
    RunOptions run;
    run.framework = Framework::jax;
    run.rollout = 2;
    const ModelDescription m = testing::tiny_model(2);
    const std::int64_t frame_channels = (m.grid_input_features - 10) / 2;
    int carries = 0;
    const CostGraph jax_graph = CostGraph::build(m, run);
    for (const Tensor& t : jax_graph.tensors())
      if (t.name.ends_with(".next_frames")) {
        ++carries;
        CHECK(t.rows == m.grid_nodes);
        CHECK(t.cols == 2 * frame_channels);
        CHECK(t.element_bytes == 4);
        CHECK(t.gradient_bytes() == t.bytes());
      }
    CHECK(carries == 2);  // the last step's too, discarded by the scan
    run.framework = Framework::pytorch;
    int inputs = 0;
    const CostGraph torch_graph = CostGraph::build(m, run);
    for (const Tensor& t : torch_graph.tensors())
      if (t.name.ends_with("next_grid_input")) {
        ++inputs;
        CHECK(t.element_bytes == 2);
      }
    CHECK(inputs == 1);  // PyTorch's loop stops at the last prediction
  }
}

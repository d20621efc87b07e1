// build_graphcast(): GraphCast's training step as an op-level DAG.
//
// Layer structure from DeepMind's graphcast code (deep_typed_graph_net.py;
// docs/model-format.md, docs/cost-model.md §1), written as the PyTorch
// reference (integrations/pytorch/graphcast_reference.py) computes it:
//   MLP(x)       = layer_norm(linear(silu(linear(x))))  (no LayerNorm on the output MLP;
//                  mlp_hidden_layers − 1 further linear+silu pairs in between)
//   edge update  e' = MLP(cat[e, v_s[senders], v_r[receivers]])
//   aggregation  agg = zeros(N_r, L).index_add(0, receivers, e')
//   node update  v' = MLP(cat[v, agg]);  v = v + v';  e = e + e' (processor)
// Tensors are [rows, cols] with rows = nodes or edges times batch; index
// arrays are shared by the batch.
//
// The model's implementation (model.h) picks the pieces where the trainers'
// codes differ (docs/cost-model.md §1, implementation rows), one function
// each: where the edge residual is added (edge_residual_before_aggregation),
// the edge MLP's input (edge_update_concat / edge_update_concat_trick), the
// encoder's embedding order (encoder_embeddings) and its grid-node update
// (encoder_grid_node_update). What each op keeps is the memory profile's.
#include <algorithm>
#include <initializer_list>
#include <span>

#include <fmt/format.h>

#include "actmem/cost/cost_graph.h"
#include "actmem/util/error.h"
#include "builders.h"

namespace actmem {
namespace {

class GraphCastBuilder {
 public:
  GraphCastBuilder(const ModelDescription& m, const RunOptions& run)
      : m_(m),
        run_(run),
        b_(m, run, stage_chain(m)),
        act_bytes_(element_bytes(run.dtype)),
        autocast_(autocasts(run)),
        float32_layer_norm_(autocast_ && run.autocast == Autocast::cuda) {}

  CostGraph build() {
    const StepInputs in = run_.framework == Framework::jax ? jax_inputs() : pytorch_inputs();
    make_parameters();
    b_.tag_rows(RowTag::batch_major_nodes, m_.grid_nodes * run_.batch);  // J15
    b_.tag_rows(RowTag::layout_copied_edges, m_.mesh_edges);             // J31

    TensorId carry = in.grid;
    for (int step = 0; step < static_cast<int>(run_.rollout); ++step) {
      step_ = step;
      // JAX: the step's grid input is assembled from the carried frames,
      // the forcings at the target time and the static channels.
      const TensorId forcing =
          in.frames ? input(fmt::format("forcings.{}", step), m_.grid_nodes * run_.batch, kForcings, 4) : -1;
      std::vector<TensorId> grid_parts{carry};
      if (in.frames) grid_parts = {carry, forcing, in.statics};
      const TensorId prediction = network(grid_parts, in);
      stage_ = loss_stage();
      Tensor target_tensor{fmt::format("target.{}", step),  in.target_rows,    m_.output_features,
                           in.frames ? 4 : feature_bytes(), TensorRole::input, false};
      target_tensor.tiled_planes = in.frames && lat_lon_shape(m_).has_value();  // J26
      const TensorId target = b_.add_tensor(std::move(target_tensor));
      // Autocast runs mse_loss in float32: on a float32 copy of the prediction.
      const TensorId scored = autocast_ ? cast("prediction_float32", prediction, 4) : prediction;
      const TensorId loss = activation("loss", 1, 1, 4);
      emit(OpKind::mse_loss, "loss", {scored, target}, {loss}, 3.0 * rows_cols(prediction),
           3.0 * rows_cols(prediction));
      // JAX's scan body computes the next carry at every step, the last
      // one's discarded (J9); PyTorch's loop stops at the last prediction.
      if (step + 1 < run_.rollout || (in.frames && run_.rollout > 1))
        carry = next_input(prediction, carry, forcing, in);
    }
    return b_.finish();
  }

  // The parameters build() declares, without its inputs and ops: they
  // depend on the model alone, not on how it is trained.
  std::int64_t parameter_count() {
    make_parameters();
    return b_.parameter_count();
  }

 private:
  struct Edges {
    TensorId senders, receivers;
  };
  // The model inputs of a step. PyTorch (the reference of
  // integrations/pytorch): features one per sample (float32; under
  // autocast too, which casts them where a linear reads them), int64
  // indices; the grid input is the step's whole grid feature tensor.
  // JAX (DeepMind's autoregressive predictor, integrations/jax): float32
  // data, int32 indices, graph features shared by the batch; `grid` is the
  // two input frames (the scan carry) and `frames` is set.
  struct StepInputs {
    TensorId grid = -1, mesh = -1, g2m = -1, mesh_edges = -1, m2g = -1;
    TensorId statics = -1;  // JAX: static and position channels per grid node
    bool frames = false;
    std::int64_t target_rows = 0;  // of each step's target, output_features wide
  };
  static constexpr std::int64_t kForcings = 5;  // forcing channels at the target time
  static constexpr std::int64_t kStatic = 5;    // 2 static + 3 position channels
  static constexpr std::int64_t kFrames = 2;    // input frames

  StepInputs pytorch_inputs() {
    StepInputs in;
    in.target_rows = m_.grid_nodes * run_.batch;
    in.grid = input("grid_features", m_.grid_nodes * run_.batch, m_.grid_input_features, feature_bytes());
    in.mesh = input("mesh_features", m_.mesh_nodes * run_.batch, m_.mesh_input_features, feature_bytes());
    in.g2m = input("grid2mesh_edge_features", m_.grid2mesh_edges * run_.batch, m_.edge_features, feature_bytes());
    in.mesh_edges = input("mesh_edge_features", m_.mesh_edges * run_.batch, m_.edge_features, feature_bytes());
    in.m2g = input("mesh2grid_edge_features", m_.mesh2grid_edges * run_.batch, m_.edge_features, feature_bytes());
    index_inputs(8);
    return in;
  }

  StepInputs jax_inputs() {
    StepInputs in;
    in.frames = true;
    in.target_rows = jax_target_rows();
    in.grid = input("frames", m_.grid_nodes * run_.batch, kFrames * time_channels(), 4);
    in.statics = input("static_features", m_.grid_nodes, kStatic, 4);
    in.mesh = input("mesh_features", m_.mesh_nodes, m_.mesh_input_features, 4);
    in.g2m = input("grid2mesh_edge_features", m_.grid2mesh_edges, m_.edge_features, 4);
    in.mesh_edges = input("mesh_edge_features", m_.mesh_edges, m_.edge_features, 4);
    in.m2g = input("mesh2grid_edge_features", m_.mesh2grid_edges, m_.edge_features, 4);
    index_inputs(4);
    return in;
  }

  // Rows of a step's float32 target under JAX. On a latitude–longitude grid
  // it is DeepMind's: one array per variable, [batch, (levels,) lat, lon] a
  // step, which XLA:TPU lays out with each [lat, lon] plane in (8, 128)
  // tiles, so its bytes are those of output_features padded planes per
  // sample (J26); otherwise one node-major [nodes, output_features] array.
  std::int64_t jax_target_rows() const {
    const auto grid = lat_lon_shape(m_);
    if (!grid) return m_.grid_nodes * run_.batch;
    return tpu_tiled_bytes(grid->second, grid->first, run_.batch, /*element_bytes=*/1);  // elements
  }

  // C_t, the channels of one input frame: grid_input_features = 2 C_t +
  // forcings at the target time + static and position channels.
  std::int64_t time_channels() const {
    const std::int64_t c = (m_.grid_input_features - kForcings - kStatic) / kFrames;
    if ((m_.grid_input_features - kForcings - kStatic) % kFrames != 0 || c < kForcings)
      throw InputError(m_.name, "/grid_input_features",
                       fmt::format("for framework jax, expected 2 x C_t + {} (two input frames of C_t >= {} "
                                   "channels, {} forcings, {} static and position channels), got {}",
                                   kForcings + kStatic, kForcings, kForcings, kStatic, m_.grid_input_features));
    if (m_.output_features < c - kForcings)
      throw InputError(m_.name, "/output_features",
                       fmt::format("for framework jax, expected at least C_t - {} = {} predicted channels, got {}",
                                   kForcings, c - kForcings, m_.output_features));
    return c;
  }

  // The next step's grid input. PyTorch: the prediction and the (static)
  // forcings, read from the first step's grid features. JAX: the next
  // carry, (frame 1, prediction's state channels + forcings at the target
  // time), float32 and kept in float32: the next step reads its frame 1 in
  // float32 too, adding the network's residual to it; its cotangent float32
  // (J9). XLA:TPU's loops lay it out [nodes, batch, frames, C_t] with the
  // nodes minor and C_t next, in tiles (J39).
  TensorId next_input(TensorId prediction, TensorId carry, TensorId forcing, const StepInputs& in) {
    if (!in.frames) {
      const TensorId next =
          activation("next_grid_input", m_.grid_nodes * run_.batch, m_.grid_input_features, act_bytes_);
      emit(OpKind::next_input, "next_input", {prediction, in.grid}, {next}, 0, 0);
      return next;
    }
    const TensorId next = b_.add_tensor({prefix() + ".next_frames", m_.grid_nodes * run_.batch,
                                         kFrames * time_channels(), 4, TensorRole::activation, true, 4,
                                         tpu_tiled_bytes(m_.grid_nodes, time_channels(), run_.batch * kFrames, 4)});
    emit(OpKind::next_input, "next_input", {prediction, carry, forcing}, {next}, 0, 0);
    return next;
  }
  // Weights of one MLP: per layer {weight, bias}, then optional LayerNorm {scale, offset}.
  // concat_trick: the first layer's weight split per input of the
  // concatenation it replaces (layers[0]'s weight is then -1).
  struct MlpParameters {
    std::vector<std::pair<TensorId, TensorId>> layers;
    std::vector<TensorId> first_layer_parts;
    TensorId ln_scale = -1, ln_offset = -1;
  };

  // GraphCast's chain: the encoder's message passing over the grid2mesh
  // edges, the mesh edges' embedding, one processor step per mesh message
  // passing, the decoder's over the mesh2grid edges.
  static std::vector<Stage> stage_chain(const ModelDescription& m) {
    std::vector<Stage> chain{{"encoder", StageRole::encoder, m.grid2mesh_edges},
                             {"mesh_edge_embed", StageRole::embedding, 0}};
    for (std::int64_t k = 0; k < m.processor_steps; ++k)
      chain.push_back({fmt::format("processor.{}", k), StageRole::processor, m.mesh_edges});
    chain.push_back({"decoder", StageRole::decoder, m.mesh2grid_edges});
    return chain;
  }
  int loss_stage() const { return static_cast<int>(m_.processor_steps) + 3; }
  std::string prefix() const {
    const std::string stage = b_.stage_name(stage_);  // "loss" past the chain
    return run_.rollout > 1 ? fmt::format("step{}.{}", step_, stage) : stage;
  }

  TensorId input(const std::string& name, std::int64_t rows, std::int64_t cols, int bytes) {
    return b_.add_tensor({name, rows, cols, bytes, TensorRole::input, false});
  }
  // The sender and receiver indices of the three edge sets, `bytes` each
  // (PyTorch's int64, JAX's int32).
  void index_inputs(int bytes) {
    auto edge_set = [&](const std::string& name, std::int64_t edges) {
      return Edges{input(name + "_senders", edges, 1, bytes), input(name + "_receivers", edges, 1, bytes)};
    };
    g2m_ = edge_set("grid2mesh", m_.grid2mesh_edges);
    mesh_ = edge_set("mesh", m_.mesh_edges);
    m2g_ = edge_set("mesh2grid", m_.mesh2grid_edges);
  }
  TensorId activation(const std::string& name, std::int64_t rows, std::int64_t cols, int bytes) {
    return b_.add_tensor({prefix() + "." + name, rows, cols, bytes, TensorRole::activation, true});
  }
  // Bytes per element of PyTorch's feature inputs and targets: float32
  // data, cast by autocast where a linear reads it; otherwise (float32 runs)
  // the activation dtype.
  int feature_bytes() const { return autocast_ ? 4 : act_bytes_; }
  // x in `bytes` per element: a new tensor that needs a gradient when x does.
  TensorId cast(const std::string& name, TensorId x, int bytes) {
    const Tensor& t = tensor(x);
    const TensorId y =
        b_.add_tensor({prefix() + "." + name, t.rows, t.cols, bytes, TensorRole::activation, t.requires_grad});
    emit(OpKind::cast, name, {x}, {y}, 0, 0);
    return y;
  }
  double rows_cols(TensorId t) const { return static_cast<double>(tensor(t).rows * tensor(t).cols); }
  // Bytes per element of an op's result from these activations: under
  // autocast an op outside its lists runs in its inputs' widest dtype
  // (float32 latents stay float32); otherwise the activation dtype.
  int result_bytes(std::span<const TensorId> inputs) const {
    if (!autocast_) return act_bytes_;
    int bytes = 0;
    for (TensorId t : inputs) bytes = std::max(bytes, tensor(t).element_bytes);
    return bytes;
  }
  int result_bytes(std::initializer_list<TensorId> inputs) const {
    return result_bytes(std::span<const TensorId>(inputs.begin(), inputs.size()));
  }
  const Tensor& tensor(TensorId t) const { return b_.tensor(t); }

  // `split_first`: the first layer's weight as one [L, L] part per input of
  // a 3L-wide concatenation (concat_trick), the bias kept whole.
  MlpParameters mlp_parameters(const std::string& name, std::int64_t in, std::int64_t out, bool layer_norm,
                               bool split_first = false) {
    MlpParameters p;
    const std::int64_t L = m_.latent_size;
    std::int64_t width = in;
    for (std::int64_t layer = 0; layer <= m_.mlp_hidden_layers; ++layer) {
      const std::int64_t next = layer == m_.mlp_hidden_layers ? out : L;
      const TensorId weight =
          layer == 0 && split_first ? -1 : parameter(fmt::format("{}.linear{}.weight", name, layer), width, next);
      p.layers.emplace_back(weight, parameter(fmt::format("{}.linear{}.bias", name, layer), 1, next));
      width = next;
    }
    if (p.layers.front().first < 0)
      for (const char* part : {"edges", "senders", "receivers"})
        p.first_layer_parts.push_back(parameter(fmt::format("{}.linear0.weight_{}", name, part), L, L));
    if (layer_norm) {
      p.ln_scale = parameter(name + ".layer_norm.scale", 1, out);
      p.ln_offset = parameter(name + ".layer_norm.offset", 1, out);
    }
    return p;
  }
  // An edge MLP (input cat[e, v_s, v_r]); PhysicsNeMo's concat_trick splits
  // its first layer per input.
  MlpParameters edge_mlp_parameters(const std::string& name) {
    return mlp_parameters(name, 3 * m_.latent_size, m_.latent_size, true, m_.concat_trick);
  }
  TensorId parameter(const std::string& name, std::int64_t rows, std::int64_t cols) {
    return b_.add_tensor({name, rows, cols, 4, TensorRole::parameter, true});
  }

  void make_parameters() {
    const std::int64_t L = m_.latent_size;
    enc_grid_embed_ = mlp_parameters("encoder.grid_node_embed", m_.grid_input_features, L, true);
    enc_mesh_embed_ = mlp_parameters("encoder.mesh_node_embed", m_.mesh_input_features, L, true);
    enc_edge_embed_ = mlp_parameters("encoder.edge_embed", m_.edge_features, L, true);
    enc_edge_mlp_ = edge_mlp_parameters("encoder.edge_mlp");
    enc_mesh_mlp_ = mlp_parameters("encoder.mesh_node_mlp", 2 * L, L, true);
    // anemoi's encoder updates its grid nodes with the mesh nodes' MLP.
    if (m_.implementation != Implementation::anemoi)
      enc_grid_mlp_ = mlp_parameters("encoder.grid_node_mlp", L, L, true);
    mesh_edge_embed_ = mlp_parameters("mesh_edge_embed", m_.edge_features, L, true);
    for (std::int64_t k = 0; k < m_.processor_steps; ++k) {
      proc_edge_mlp_.push_back(edge_mlp_parameters(fmt::format("processor.{}.edge_mlp", k)));
      proc_node_mlp_.push_back(mlp_parameters(fmt::format("processor.{}.node_mlp", k), 2 * L, L, true));
    }
    dec_edge_embed_ = mlp_parameters("decoder.edge_embed", m_.edge_features, L, true);
    dec_edge_mlp_ = edge_mlp_parameters("decoder.edge_mlp");
    dec_grid_mlp_ = mlp_parameters("decoder.grid_node_mlp", 2 * L, L, true);
    // Built by DeepMind's code, output discarded: parameters only, no ops.
    if (m_.implementation == Implementation::deepmind)
      dec_unused_mesh_mlp_ = mlp_parameters("decoder.mesh_node_mlp_unused", L, L, true);
    dec_output_mlp_ = mlp_parameters("decoder.output_mlp", L, m_.output_features, false);
  }

  void emit(OpKind kind, const std::string& name, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
            double forward_flops, double backward_flops) {
    Op op;
    op.kind = kind;
    op.name = prefix() + "." + name;
    op.stage = stage_;
    op.step = step_;
    op.inputs = std::move(inputs);
    op.outputs = std::move(outputs);
    op.forward_flops = forward_flops;
    op.backward_flops = backward_flops;
    op.edge_update = in_edge_update_;
    op.part = marking_edge_mlp_ ? edge_mlp_part(kind) : OpPart::none;
    last_op_ = b_.add_op(std::move(op));
  }

  // x → [linear → silu] × hidden → linear → (layer_norm). Returns the output.
  // `rows`: the rows it runs on when x is shared by the batch (broadcast
  // inside the first linear); default x's.
  TensorId mlp(const std::string& name, TensorId x, const MlpParameters& p, std::int64_t rows = -1) {
    if (rows < 0) rows = tensor(x).rows;
    const auto [w, bias] = p.layers.front();
    return mlp_after_first_linear(name, linear(name + ".linear0", x, w, bias, rows), p);
  }

  // x·Wᵀ (+ b when bias ≥ 0) on `rows` rows. Under autocast a float32 x
  // is cast first, and the linear keeps that bfloat16 copy.
  TensorId linear(const std::string& name, TensorId x, TensorId w, TensorId bias, std::int64_t rows) {
    if (autocast_ && tensor(x).element_bytes != act_bytes_) x = cast(name + ".input_cast", x, act_bytes_);
    const std::int64_t in = tensor(w).rows, out = tensor(w).cols;
    const TensorId y = activation(name, rows, out, act_bytes_);
    const double mm = 2.0 * static_cast<double>(rows) * static_cast<double>(in) * static_cast<double>(out);
    std::vector<TensorId> inputs{x, w};
    if (bias >= 0) inputs.push_back(bias);
    emit(OpKind::linear, name, std::move(inputs), {y}, mm, 2.0 * mm);
    return y;
  }

  // The rest of an MLP, from its first linear's output h: [silu → linear]
  // for each further layer, then the LayerNorm if it has one.
  TensorId mlp_after_first_linear(const std::string& name, TensorId h, const MlpParameters& p) {
    const std::int64_t rows = tensor(h).rows;
    for (std::size_t layer = 1; layer < p.layers.size(); ++layer) {
      const TensorId s = activation(fmt::format("{}.silu{}", name, layer - 1), rows, tensor(h).cols, result_bytes({h}));
      emit(OpKind::silu, fmt::format("{}.silu{}", name, layer - 1), {h}, {s}, 4.0 * rows_cols(h), 8.0 * rows_cols(h));
      const auto [w, bias] = p.layers[layer];
      h = linear(fmt::format("{}.linear{}", name, layer), s, w, bias, rows);
    }
    if (p.ln_scale < 0) return h;
    if (float32_layer_norm_) h = cast(name + ".layer_norm.input_cast", h, 4);
    const TensorId y = activation(name + ".layer_norm", rows, tensor(h).cols, result_bytes({h}));
    const TensorId stats = activation(name + ".layer_norm.stats", rows, 2, 4);
    emit(OpKind::layer_norm, name + ".layer_norm", {h, p.ln_scale, p.ln_offset}, {y, stats}, 8.0 * rows_cols(h),
         16.0 * rows_cols(h));
    return y;
  }

  TensorId gather(const std::string& name, TensorId source, TensorId index) {
    const TensorId out = activation(name, tensor(index).rows * run_.batch, tensor(source).cols, result_bytes({source}));
    emit(OpKind::gather, name, {source, index}, {out}, 0, rows_cols(out));
    return out;
  }

  // Parts along the feature axis, in the activation dtype; `cols` < 0: the
  // parts' total (a part shared by the batch is broadcast to the rows of
  // the first).
  TensorId concat(const std::string& name, std::vector<TensorId> parts, std::int64_t cols = -1) {
    if (cols < 0) {
      cols = 0;
      for (TensorId t : parts) cols += tensor(t).cols;
    }
    const TensorId out = activation(name, tensor(parts.front()).rows, cols, result_bytes(parts));
    emit(OpKind::concat, name, std::move(parts), {out}, 0, 0);
    return out;
  }

  TensorId add(const std::string& name, TensorId a, TensorId b) {
    const TensorId out = activation(name, tensor(a).rows, tensor(a).cols, result_bytes({a, b}));
    emit(OpKind::add, name, {a, b}, {out}, rows_cols(a), 0);
    return out;
  }

  // One message passing: the edge update (blockable), optionally the edge
  // residual, then the sum of the edges per receiver. Returns {the edge
  // latent it leaves (e' without residual, e + e' with), aggregated messages}.
  std::pair<TensorId, TensorId> message_passing(TensorId edges, TensorId senders_from, TensorId receivers_from,
                                                const Edges& graph, std::int64_t receiver_nodes,
                                                const MlpParameters& edge_mlp, bool residual, bool float32_sum) {
    const TensorId updated = m_.concat_trick
                                 ? edge_update_concat_trick(edges, senders_from, receivers_from, graph, edge_mlp)
                                 : edge_update_concat(edges, senders_from, receivers_from, graph, edge_mlp);
    const TensorId messages = residual ? add("edge_residual", edges, updated) : updated;
    return {messages, aggregate(messages, graph, receiver_nodes, float32_sum)};
  }

  // The part of the edge MLP (OpPart) an op of kind `kind` plays, emitted
  // in its order: the gathers of the senders, then of the receivers, the
  // concat, the first linear, SiLU, the second linear, the LayerNorm. A
  // deeper MLP's further layers repeat parts, which its memory rules then
  // do not recognise.
  OpPart edge_mlp_part(OpKind kind) {
    switch (kind) {
      case OpKind::gather: return gathers_marked_++ == 0 ? OpPart::edge_sender_gather : OpPart::edge_receiver_gather;
      case OpKind::concat: return OpPart::edge_input_concat;
      case OpKind::linear: return linears_marked_++ == 0 ? OpPart::edge_first_linear : OpPart::edge_second_linear;
      case OpKind::silu: return OpPart::edge_activation;
      case OpKind::layer_norm: return OpPart::edge_norm;
      default: return OpPart::none;
    }
  }

  // e' = MLP(cat[e, v_s[senders], v_r[receivers]]), marked as the edge MLP
  // pattern (OpPart).
  TensorId edge_update_concat(TensorId edges, TensorId senders_from, TensorId receivers_from, const Edges& graph,
                              const MlpParameters& edge_mlp) {
    in_edge_update_ = marking_edge_mlp_ = true;
    gathers_marked_ = linears_marked_ = 0;
    const TensorId sent = gather("gather_senders", senders_from, graph.senders);
    const TensorId received = gather("gather_receivers", receivers_from, graph.receivers);
    const TensorId edge_input = concat("edge_input", {edges, sent, received});
    const TensorId updated = mlp("edge_mlp", edge_input, edge_mlp);
    in_edge_update_ = marking_edge_mlp_ = false;
    return updated;
  }

  // PhysicsNeMo's concat_trick (MeshGraphEdgeMLPSum): the first layer per
  // input, the node parts projected on the nodes, then gathered, and the
  // three summed per edge (sum_edge_node_feat, run eagerly: the gathered
  // terms are temporaries); then the rest of the MLP. The linears keep e and
  // the node latents instead of the [E, 3L] concatenation. The node
  // projections run before the edge one (PhysicsNeMo: after it) so that the
  // edge update stays one contiguous, blockable run.
  TensorId edge_update_concat_trick(TensorId edges, TensorId senders_from, TensorId receivers_from, const Edges& graph,
                                    const MlpParameters& edge_mlp) {
    const std::vector<TensorId>& w = edge_mlp.first_layer_parts;
    const TensorId bias = edge_mlp.layers.front().second;
    const TensorId sender_part = linear("edge_mlp.linear0_senders", senders_from, w[1], -1, tensor(senders_from).rows);
    const TensorId receiver_part =
        linear("edge_mlp.linear0_receivers", receivers_from, w[2], bias, tensor(receivers_from).rows);
    in_edge_update_ = true;
    const TensorId edge_part = linear("edge_mlp.linear0_edges", edges, w[0], -1, tensor(edges).rows);
    const TensorId with_senders =
        add("edge_mlp.sum_senders", edge_part, gather("gather_senders", sender_part, graph.senders));
    const TensorId summed =
        add("edge_mlp.sum_receivers", with_senders, gather("gather_receivers", receiver_part, graph.receivers));
    const TensorId updated = mlp_after_first_linear("edge_mlp", summed, edge_mlp);
    in_edge_update_ = false;
    return updated;
  }

  // agg = the sum of `messages` per receiver, into zeros (the memory
  // profile says what the implementation's op keeps).
  TensorId aggregate(TensorId messages, const Edges& graph, std::int64_t receiver_nodes, bool float32_sum) {
    const int sum_bytes = float32_sum ? 4 : result_bytes({messages});
    const TensorId zeros = b_.add_tensor({prefix() + ".aggregate_zeros", receiver_nodes * run_.batch, m_.latent_size,
                                          sum_bytes, TensorRole::activation, false});
    emit(OpKind::zeros, "aggregate_zeros", {}, {zeros}, 0, 0);
    const TensorId aggregated = activation("aggregate", receiver_nodes * run_.batch, m_.latent_size, sum_bytes);
    emit(OpKind::scatter_add, "aggregate", {zeros, graph.receivers, messages}, {aggregated}, rows_cols(messages),
         rows_cols(messages));
    return aggregated;
  }

  // Where each implementation adds e' to the edge latent e. DeepMind: in the
  // processor only, after the node update (the aggregation reads e').
  // PhysicsNeMo: in the processor only, before aggregating (MeshEdgeBlock:
  // efeat_new = edge_mlp(...) + efeat, which MeshNodeBlock aggregates).
  // anemoi: in every message passing, before aggregating (GraphConv.message:
  // edge_mlp(...) + edge_attr).
  enum class EdgeSet { grid2mesh, mesh, mesh2grid };
  bool edge_residual_before_aggregation(EdgeSet set) const {
    switch (m_.implementation) {
      case Implementation::deepmind: return false;
      case Implementation::physicsnemo: return set == EdgeSet::mesh;
      case Implementation::anemoi: return true;
    }
    return false;
  }

  // The encoder's embeddings, in the implementation's order: anemoi's
  // forward mapper embeds its edges before its nodes (emb_edges, then
  // pre_process); the others embed grid nodes, mesh nodes, then edges.
  struct Embedded {
    TensorId grid, mesh, edges;
  };
  Embedded encoder_embeddings(TensorId grid_features, const StepInputs& in) {
    Embedded e{};
    auto edges = [&] { e.edges = mlp("edge_embed", in.g2m, enc_edge_embed_, m_.grid2mesh_edges * run_.batch); };
    if (m_.implementation == Implementation::anemoi) edges();
    e.grid = mlp("grid_node_embed", grid_features, enc_grid_embed_);
    e.mesh = mlp("mesh_node_embed", in.mesh, enc_mesh_embed_, m_.mesh_nodes * run_.batch);
    if (m_.implementation != Implementation::anemoi) edges();
    return e;
  }

  // The encoder's grid-node update v_g + MLP(…): a grid-node MLP on v_g
  // (DeepMind, PhysicsNeMo), or anemoi's mapper block updating its source
  // nodes with the destination nodes' MLP, node_mlp(cat[v_g, v_g]).
  TensorId encoder_grid_node_update(TensorId v_grid) {
    const TensorId update = m_.implementation == Implementation::anemoi
                                ? mlp("grid_node_mlp", concat("grid_node_input", {v_grid, v_grid}), enc_mesh_mlp_)
                                : mlp("grid_node_mlp", v_grid, enc_grid_mlp_);
    return add("grid_node_residual", v_grid, update);
  }

  TensorId network(const std::vector<TensorId>& grid_parts, const StepInputs& in) {
    // encoder: embedders, grid2mesh message passing, node updates.
    stage_ = 0;
    const TensorId grid_features =
        grid_parts.size() == 1 ? grid_parts.front() : concat("grid_input", grid_parts, m_.grid_input_features);
    const Embedded embedded = encoder_embeddings(grid_features, in);
    TensorId v_grid = embedded.grid, v_mesh = embedded.mesh;
    const bool float32_sum = run_.framework == Framework::jax && run_.dtype != DType::float32;
    // The updated grid2mesh edges are discarded.
    const auto [g2m_messages, agg_mesh] =
        message_passing(embedded.edges, v_grid, v_mesh, g2m_, m_.mesh_nodes, enc_edge_mlp_,
                        edge_residual_before_aggregation(EdgeSet::grid2mesh), float32_sum);
    const TensorId mesh_update = mlp("mesh_node_mlp", concat("mesh_node_input", {v_mesh, agg_mesh}), enc_mesh_mlp_);
    v_mesh = add("mesh_node_residual", v_mesh, mesh_update);
    v_grid = encoder_grid_node_update(v_grid);
    hold_in_function_scope({g2m_messages});  // PhysicsNeMo: MeshGraphEncoder.forward's efeat

    stage_ = 1;
    TensorId e_mesh = mlp("edge_embed", in.mesh_edges, mesh_edge_embed_, m_.mesh_edges * run_.batch);

    const bool residual_first = edge_residual_before_aggregation(EdgeSet::mesh);
    for (std::int64_t k = 0; k < m_.processor_steps; ++k) {
      stage_ = static_cast<int>(2 + k);
      const auto k_ = static_cast<std::size_t>(k);
      const auto [edges_out, agg] =
          message_passing(e_mesh, v_mesh, v_mesh, mesh_, m_.mesh_nodes, proc_edge_mlp_[k_], residual_first, false);
      const TensorId v_update = mlp("node_mlp", concat("node_input", {v_mesh, agg}), proc_node_mlp_[k_]);
      v_mesh = add("node_residual", v_mesh, v_update);
      // JAX traces the step and drops what the loss does not read: the
      // decoder reads the mesh nodes only, so the last step's e + e' is
      // never computed (J22). PyTorch runs it eagerly.
      const bool read_later = k + 1 < m_.processor_steps || run_.framework != Framework::jax;
      if (residual_first)
        e_mesh = edges_out;
      else if (read_later)
        e_mesh = add("edge_residual", e_mesh, edges_out);
    }

    stage_ = static_cast<int>(2 + m_.processor_steps);
    const TensorId e_m2g = mlp("edge_embed", in.m2g, dec_edge_embed_, m_.mesh2grid_edges * run_.batch);
    const auto [m2g_messages, agg_grid] = message_passing(e_m2g, v_mesh, v_grid, m2g_, m_.grid_nodes, dec_edge_mlp_,
                                                          edge_residual_before_aggregation(EdgeSet::mesh2grid), false);
    const TensorId g_update = mlp("grid_node_mlp", concat("grid_node_input", {v_grid, agg_grid}), dec_grid_mlp_);
    v_grid = add("grid_node_residual", v_grid, g_update);
    hold_in_function_scope({m2g_messages});  // PhysicsNeMo: MeshGraphDecoder.forward's efeat
    const TensorId prediction = mlp("output_mlp", v_grid, dec_output_mlp_);
    hold_in_function_scope({e_m2g});  // PhysicsNeMo: decoder_forward's m2g_efeat_embedded
    return prediction;
  }

  // PhysicsNeMo's functions keep their intermediate tensors in local names
  // until they return (docs/validation-trainers.md §5, pinned in its per-op
  // timeline): where such a function returns with the op just emitted, its
  // names let go of `tensors` there (Op::releases_held). Only the holds
  // inside one stage are modelled: MeshGraphEncoder's and MeshGraphDecoder's
  // edge outputs, decoder_forward's decoder edge embedding. The other
  // implementations' holds are not measured: nothing is held.
  void hold_in_function_scope(std::initializer_list<TensorId> tensors) {
    if (m_.implementation != Implementation::physicsnemo) return;
    for (TensorId t : tensors) b_.hold_until(last_op_, t);
  }

  const ModelDescription& m_;
  const RunOptions& run_;
  CostGraphBuilder b_;
  int act_bytes_;
  // PyTorch in bfloat16 means torch.autocast: float32 inputs and loss, casts
  // where a linear reads float32 (docs/pytorch-memory-profile.md).
  bool autocast_;
  // CUDA's autocast runs LayerNorm in float32, on a float32 copy of its
  // input: every latent is float32, and so are the gathers, concatenations,
  // residuals and sums that read them ("CUDA autocast to bfloat16").
  bool float32_layer_norm_;
  int stage_ = 0;
  int step_ = 0;
  bool in_edge_update_ = false;
  bool marking_edge_mlp_ = false;  // edge_update_concat(): ops get their OpPart
  int gathers_marked_ = 0, linears_marked_ = 0;
  OpId last_op_ = -1;
  Edges g2m_{}, mesh_{}, m2g_{};
  MlpParameters enc_grid_embed_, enc_mesh_embed_, enc_edge_embed_, enc_edge_mlp_, enc_mesh_mlp_, enc_grid_mlp_;
  MlpParameters mesh_edge_embed_, dec_edge_embed_, dec_edge_mlp_, dec_grid_mlp_, dec_unused_mesh_mlp_, dec_output_mlp_;
  std::vector<MlpParameters> proc_edge_mlp_, proc_node_mlp_;
};

}  // namespace

CostGraph build_graphcast(const ModelDescription& model, const RunOptions& run) {
  return GraphCastBuilder(model, run).build();
}

std::int64_t graphcast_parameter_count(const ModelDescription& model) {
  const RunOptions run;  // any: make_parameters() reads only the model
  return GraphCastBuilder(model, run).parameter_count();
}

}  // namespace actmem

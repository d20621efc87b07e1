// The backward of an edge update in blocks as XLA orders it (J17): the
// blocks' instructions interleave, so their peak is sampled from XLA's
// order (edge_block_backward.h) on top of what the machine holds.

#include "simulate/memory_machine.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "simulate/edge_block_backward.h"

namespace actmem::detail {

// The ops and tensors of an edge update in blocks that XLA's order
// describes: the gathers of the senders' and receivers' features, their
// concat with the edges' latent, linear, SiLU, linear, LayerNorm.
struct EdgeMlp {
  const Op *gathers[2] = {nullptr, nullptr}, *concat = nullptr, *first = nullptr, *silu = nullptr, *second = nullptr,
           *norm = nullptr;
  TensorId output = -1, senders = -1, receivers = -1, edges = -1, gathered[2] = {-1, -1}, hidden = -1, activated = -1,
           pre_norm = -1;

  // The graph's tensor that holds `value` (or whose gradient it is).
  TensorId tensor_of(EdgeBlockValue value) const {
    using V = EdgeBlockValue;
    switch (value) {
      case V::output_gradient:
      case V::output_gradient_slice: return output;
      case V::senders:
      case V::senders_copy:
      case V::sender_gradient: return senders;
      case V::receivers:
      case V::receivers_copy:
      case V::receiver_gradient: return receivers;
      case V::gathered_senders:
      case V::sender_part: return gathered[0];
      case V::gathered_receivers:
      case V::receiver_part: return gathered[1];
      case V::edges:
      case V::edge_gradient:
      case V::edge_slice:
      case V::edge_part: return edges;
      case V::hidden:
      case V::hidden_gradient: return hidden;
      case V::silu: return activated;
      case V::pre_norm:
      case V::pre_norm_gradient: return pre_norm;
      case V::norm_statistics: return norm->outputs.size() > 1 ? norm->outputs[1] : pre_norm;
      case V::first_weight_partial: return first->inputs[1];
      case V::second_weight_partial: return second->inputs[1];
      case V::input_gradient: return concat->outputs.front();
    }
    return -1;
  }

  // The op whose forward (recomputation) or backward `step` is part of.
  const Op& op_at(EdgeBlockStep step) const {
    using S = EdgeBlockStep;
    switch (step) {
      case S::copy_senders:
      case S::gather_senders:
      case S::scatter_senders: return *gathers[0];
      case S::copy_receivers:
      case S::gather_receivers:
      case S::scatter_receivers: return *gathers[1];
      case S::slice_edges:
      case S::split_input_gradient:
      case S::write_edge_gradient: return *concat;
      case S::first_linear:
      case S::first_weight_gradient:
      case S::first_weight_update:
      case S::first_linear_backward: return *first;
      case S::second_linear:
      case S::second_weight_gradient:
      case S::second_weight_update: return *second;
      case S::second_linear_backward: return *silu;
      default: return *norm;
    }
  }

  // Whether `step` recomputes a block's forward.
  static bool recomputes(EdgeBlockStep step) {
    using S = EdgeBlockStep;
    return step == S::copy_senders || step == S::copy_receivers || step == S::gather_senders ||
           step == S::gather_receivers || step == S::slice_edges || step == S::first_linear || step == S::second_linear;
  }
};

namespace {

// The blocks' edge MLP, if the builder marked their seven ops as its parts
// (OpPart), each once, wired as EdgeMlp says.
std::optional<EdgeMlp> match_edge_mlp(const CostGraph& g, const Item& item) {
  EdgeMlp m;
  if (item.children.size() != 7) return std::nullopt;
  for (const Item& child : item.children) {
    if (child.kind != Item::Kind::op) return std::nullopt;
    const Op& op = g.op(child.op);
    const Op* none = nullptr;
    const Op*& slot = op.part == OpPart::edge_sender_gather     ? m.gathers[0]
                      : op.part == OpPart::edge_receiver_gather ? m.gathers[1]
                      : op.part == OpPart::edge_input_concat    ? m.concat
                      : op.part == OpPart::edge_first_linear    ? m.first
                      : op.part == OpPart::edge_activation      ? m.silu
                      : op.part == OpPart::edge_second_linear   ? m.second
                      : op.part == OpPart::edge_norm            ? m.norm
                                                                : none;
    if (slot != nullptr || &slot == &none) return std::nullopt;
    slot = &op;
  }
  m.output = item.output;
  m.gathered[0] = m.gathers[0]->outputs.front();
  m.gathered[1] = m.gathers[1]->outputs.front();
  for (TensorId t : m.concat->inputs)
    if (t != m.gathered[0] && t != m.gathered[1]) m.edges = t;
  m.hidden = m.first->outputs.front();
  m.activated = m.silu->outputs.front();
  m.pre_norm = m.second->outputs.front();
  m.senders = m.gathers[0]->inputs.front();
  m.receivers = m.gathers[1]->inputs.front();
  if (m.concat->inputs.size() != 3 || m.edges < 0 || m.first->inputs.front() != m.concat->outputs.front() ||
      m.silu->inputs.front() != m.hidden || m.second->inputs.front() != m.activated ||
      m.norm->inputs.front() != m.pre_norm || m.norm->outputs.front() != item.output)
    return std::nullopt;
  return m;
}

std::int64_t row_bytes(const Tensor& x) { return x.cols * x.element_bytes; }
std::int64_t gradient_row_bytes(const Tensor& x) {
  return x.cols * (x.gradient_element_bytes > 0 ? x.gradient_element_bytes : x.element_bytes);
}

// What one block of `rows` edges makes.
EdgeBlockSizes::Block block_sizes(const CostGraph& g, const EdgeMlp& m, std::int64_t rows) {
  auto row = [&](TensorId t) { return rows * row_bytes(g.tensor(t)); };
  auto gradient_row = [&](TensorId t) { return rows * gradient_row_bytes(g.tensor(t)); };
  EdgeBlockSizes::Block b;
  b.output_gradient = gradient_row(m.output);
  b.gathered_senders = row(m.gathered[0]);
  b.gathered_receivers = row(m.gathered[1]);
  b.edge_slice = row(m.edges);
  b.hidden = row(m.hidden);
  b.silu = row(m.activated);
  b.pre_norm = row(m.pre_norm);
  b.norm_statistics = rows * 4;  // one float32 a row (XLA's fused reduction)
  b.pre_norm_gradient = gradient_row(m.pre_norm);
  b.hidden_gradient = gradient_row(m.hidden);
  b.input_gradient = gradient_row(m.concat->outputs.front());
  b.sender_part = gradient_row(m.gathered[0]);
  b.receiver_part = gradient_row(m.gathered[1]);
  b.edge_part = gradient_row(m.edges);
  return b;
}

// The values the blocks start from, which the machine holds.
constexpr EdgeBlockValue kStartingValues[] = {EdgeBlockValue::output_gradient, EdgeBlockValue::senders,
                                              EdgeBlockValue::receivers,       EdgeBlockValue::edges,
                                              EdgeBlockValue::sender_gradient, EdgeBlockValue::receiver_gradient,
                                              EdgeBlockValue::edge_gradient};

}  // namespace

// Whether t outlives the blocks' backward: an op that runs before the
// blocks in the forward pass keeps it for its own backward, which runs
// after theirs (it saves t, or its fused output that a consumer saves).
// Otherwise XLA frees t at its last reader in the blocks. Read off the graph,
// so that a stage's replay by the solver decides as the whole step does.
bool MemoryMachine::held_past_blocks(TensorId t, const Item& item) const {
  for (OpId c : g_.consumers(t))
    if (c < item.first_op && read_saves(g_, profile_, c, t)) return true;
  return false;
}

// The peak of XLA's order of the blocks' backward (edge_block_backward.h),
// sampled on top of what is live when it starts: the machine's buffers,
// less those XLA has freed by then, plus the blocks' own live there. False
// (nothing sampled) when the blocks are not the edge MLP it describes.
bool MemoryMachine::sample_xla_blocked_backward(const Item& item) {
  const std::optional<EdgeMlp> mlp = match_edge_mlp(g_, item);
  if (!mlp || grad(item.output) < 0 || current(mlp->senders) < 0 || current(mlp->receivers) < 0 ||
      current(mlp->edges) < 0)
    return false;
  // Where the floor peaks, then where the memory does (the report places the
  // peak at the first sample of the most memory).
  const EdgeBlockBackward scheduled = edge_block_backward(edge_block_sizes(*mlp, item));
  sample_edge_block_place(*mlp, scheduled.floor);
  if (scheduled.floor.added != scheduled.peak.added || scheduled.floor.step != scheduled.peak.step ||
      scheduled.floor.block != scheduled.peak.block)
    sample_edge_block_place(*mlp, scheduled.peak);
  return true;
}

// The sizes XLA's order of the blocks' backward is computed from: the
// blocks', those of the buffers the machine holds as they start, and the
// profile's choices of order.
EdgeBlockSizes MemoryMachine::edge_block_sizes(const EdgeMlp& m, const Item& item) const {
  EdgeBlockSizes s;
  for (std::int64_t rows : item.block_rows) s.blocks.push_back(block_sizes(g_, m, rows));
  s.output_gradient = buffer(grad(m.output)).bytes;
  s.senders = buffer(current(m.senders)).bytes;
  s.receivers = buffer(current(m.receivers)).bytes;
  s.edges = buffer(current(m.edges)).bytes;
  s.senders_held = held_past_blocks(m.senders, item);
  s.receivers_held = held_past_blocks(m.receivers, item);
  s.edges_held = held_past_blocks(m.edges, item);
  s.receivers_are_senders = current(m.senders) == current(m.receivers);
  s.every_block_writes_silu = profile_.every_edge_block_writes_silu;
  s.updated_block_writes_hidden_alone = profile_.loop_body_updated_edge_block_writes_hidden_alone && in_loop_body_;
  s.partials_after_next_block = profile_.edge_block_partials_after_next_block;
  s.recomputations_first = profile_.offloaded_step_blocks_recomputed_first && in_offloaded_body();
  // At batch > 1 XLA:TPU lays the grid nodes' features out batch-major and
  // copies them, in the gathers' dtype (bfloat16 under float32, J13), to
  // gather from them (J15); the mesh nodes' it gathers from directly.
  auto copy_of = [&](TensorId nodes, TensorId gathered_from_them) -> std::int64_t {
    if (g_.run().batch == 1 || !g_.rows_tagged(tensor(nodes).rows, RowTag::batch_major_nodes)) return 0;
    return tensor(nodes).rows * row_bytes(tensor(gathered_from_them));
  };
  s.senders_copy = copy_of(m.senders, m.gathered[0]);
  s.receivers_copy = s.receivers_are_senders ? 0 : copy_of(m.receivers, m.gathered[1]);
  s.sender_gradient = tensor(m.senders).gradient_bytes();
  s.receiver_gradient = tensor(m.receivers).gradient_bytes();
  s.edge_gradient = tensor(m.edges).gradient_bytes();
  s.sender_gradient_exists = grad(m.senders) >= 0;
  s.receiver_gradient_exists = grad(m.receivers) >= 0;
  s.edge_gradient_exists = grad(m.edges) >= 0;
  const int activation_bytes = tensor(m.hidden).element_bytes;
  auto partial = [&](const Op& linear) {
    const Tensor& w = tensor(linear.inputs[1]);
    return w.rows * w.cols * activation_bytes;
  };
  s.first_weight_partial = partial(*m.first);
  s.second_weight_partial = partial(*m.second);
  for (EdgeBlockValue value :
       {EdgeBlockValue::senders, EdgeBlockValue::receivers, EdgeBlockValue::edges, EdgeBlockValue::gathered_senders,
        EdgeBlockValue::gathered_receivers, EdgeBlockValue::edge_slice, EdgeBlockValue::hidden, EdgeBlockValue::silu,
        EdgeBlockValue::pre_norm})
    if (compiler_recomputable(m.tensor_of(value))) s.compiler_recomputable.push_back(value);
  return s;
}

// The machine's buffer that holds starting value `value`, or -1.
int MemoryMachine::edge_block_start_buffer(const EdgeMlp& m, EdgeBlockValue value) const {
  switch (value) {
    case EdgeBlockValue::output_gradient: return grad(m.output);
    case EdgeBlockValue::senders: return current(m.senders);
    case EdgeBlockValue::receivers: return current(m.receivers);
    case EdgeBlockValue::edges: return current(m.edges);
    case EdgeBlockValue::sender_gradient: return grad(m.senders);
    case EdgeBlockValue::receiver_gradient: return grad(m.receivers);
    case EdgeBlockValue::edge_gradient: return grad(m.edges);
    default: return -1;
  }
}

// Memory at a place of XLA's order: the machine's buffers less the starting
// values freed by then (set aside for the sample), plus the blocks' own
// live there.
void MemoryMachine::sample_edge_block_place(const EdgeMlp& m, const EdgeBlockPeak& place) {
  std::vector<int> starting_live, made;
  for (const EdgeBlockPeak::Live& l : place.live) {
    const int b = l.block < 0 ? edge_block_start_buffer(m, l.value) : -1;
    if (b >= 0)
      starting_live.push_back(b);
    else
      made.push_back(allocate(l.bytes, is_gradient(l.value) ? kGradients : kActivations, 1, m.tensor_of(l.value)));
  }
  std::vector<std::pair<int, int>> set_aside;  // buffer, its references
  for (EdgeBlockValue value : kStartingValues) {
    const int b = edge_block_start_buffer(m, value);
    if (b < 0 || std::count(starting_live.begin(), starting_live.end(), b) > 0) continue;
    if (std::any_of(set_aside.begin(), set_aside.end(), [&](const auto& a) { return a.first == b; })) continue;
    Buffer& x = buffer(b);
    set_aside.push_back({b, x.refs});
    x.refs = 0;
    live_[x.category] -= x.bytes;
    if (x.compiler_recomputable) live_recomputable_ -= x.bytes;
  }
  sample_op(EdgeMlp::recomputes(place.step) ? Pass::recompute : Pass::backward, m.op_at(place.step), place.block);
  for (int b : made) release(b);
  for (const auto& [b, refs] : set_aside) {
    Buffer& x = buffer(b);
    x.refs = refs;
    live_[x.category] += x.bytes;
    if (x.compiler_recomputable) live_recomputable_ += x.bytes;
  }
}

}  // namespace actmem::detail

// The backward of an edge update in blocks as XLA orders it (J17): the
// blocks' instructions interleave, so their peak is sampled from XLA's
// order (edge_block_backward.h) on top of what the machine holds.

#include "simulate/memory_machine.h"

#include <algorithm>
#include <utility>

#include "simulate/edge_block_backward.h"

namespace actmem::detail {

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
  const Op *gathers[2] = {nullptr, nullptr}, *concat = nullptr, *first = nullptr, *silu = nullptr, *second = nullptr,
           *norm = nullptr;
  for (const Item& child : item.children) {
    if (child.kind != Item::Kind::op) return false;
    const Op& op = g_.op(child.op);
    const Op* unexpected = nullptr;
    const Op*& slot = op.kind == OpKind::gather       ? (gathers[0] ? gathers[1] : gathers[0])
                      : op.kind == OpKind::concat     ? concat
                      : op.kind == OpKind::silu       ? silu
                      : op.kind == OpKind::layer_norm ? norm
                      : op.kind == OpKind::linear     ? (first ? second : first)
                                                      : unexpected;
    if (slot != nullptr || &slot == &unexpected) return false;
    slot = &op;
  }
  if (!gathers[1] || !concat || !first || !silu || !second || !norm || item.children.size() != 7) return false;
  const TensorId gathered[2] = {gathers[0]->outputs.front(), gathers[1]->outputs.front()};
  TensorId edges = -1;
  for (TensorId t : concat->inputs)
    if (t != gathered[0] && t != gathered[1]) edges = t;
  const TensorId hidden = first->outputs.front(), activated = silu->outputs.front(), pre_norm = second->outputs.front();
  if (concat->inputs.size() != 3 || edges < 0 || first->inputs.front() != concat->outputs.front() ||
      silu->inputs.front() != hidden || second->inputs.front() != activated || norm->inputs.front() != pre_norm ||
      norm->outputs.front() != item.output)
    return false;
  const TensorId senders = gathers[0]->inputs.front(), receivers = gathers[1]->inputs.front();
  const int output_gradient = grad(item.output);
  if (output_gradient < 0 || current(senders) < 0 || current(receivers) < 0 || current(edges) < 0) return false;

  auto row = [&](TensorId t) { return tensor(t).cols * tensor(t).element_bytes; };
  auto gradient_row = [&](TensorId t) {
    const Tensor& x = tensor(t);
    return x.cols * (x.gradient_element_bytes > 0 ? x.gradient_element_bytes : x.element_bytes);
  };
  EdgeBlockSizes s;
  for (std::int64_t rows : item.block_rows) {
    EdgeBlockSizes::Block b;
    b.output_gradient = rows * gradient_row(item.output);
    b.gathered_senders = rows * row(gathered[0]);
    b.gathered_receivers = rows * row(gathered[1]);
    b.edge_slice = rows * row(edges);
    b.hidden = rows * row(hidden);
    b.silu = rows * row(activated);
    b.pre_norm = rows * row(pre_norm);
    b.norm_statistics = rows * 4;  // one float32 a row (XLA's fused reduction)
    b.pre_norm_gradient = rows * gradient_row(pre_norm);
    b.hidden_gradient = rows * gradient_row(hidden);
    b.input_gradient = rows * gradient_row(concat->outputs.front());
    b.sender_part = rows * gradient_row(gathered[0]);
    b.receiver_part = rows * gradient_row(gathered[1]);
    b.edge_part = rows * gradient_row(edges);
    s.blocks.push_back(b);
  }
  s.output_gradient = buffer(output_gradient).bytes;
  s.senders = buffer(current(senders)).bytes;
  s.receivers = buffer(current(receivers)).bytes;
  s.edges = buffer(current(edges)).bytes;
  s.senders_held = held_past_blocks(senders, item);
  s.receivers_held = held_past_blocks(receivers, item);
  s.edges_held = held_past_blocks(edges, item);
  s.receivers_are_senders = current(senders) == current(receivers);
  s.every_block_writes_silu = profile_.every_edge_block_writes_silu;
  s.updated_block_writes_hidden_alone = profile_.loop_body_updated_edge_block_writes_hidden_alone && in_loop_body_;
  s.partials_after_next_block = profile_.edge_block_partials_after_next_block;
  s.recomputations_first = profile_.offloaded_step_blocks_recomputed_first && in_offloaded_body();
  // At batch > 1 XLA:TPU lays the grid nodes' features out batch-major and
  // copies them, in the gathers' dtype (bfloat16 under float32, J13), to
  // gather from them (J15); the mesh nodes' it gathers from directly.
  auto copy_of = [&](TensorId nodes, TensorId gathered_from_them) -> std::int64_t {
    if (g_.run().batch == 1 || !g_.rows_tagged(tensor(nodes).rows, RowTag::batch_major_nodes)) return 0;
    return tensor(nodes).rows * row(gathered_from_them);
  };
  s.senders_copy = copy_of(senders, gathered[0]);
  s.receivers_copy = s.receivers_are_senders ? 0 : copy_of(receivers, gathered[1]);
  s.sender_gradient = tensor(senders).gradient_bytes();
  s.receiver_gradient = tensor(receivers).gradient_bytes();
  s.edge_gradient = tensor(edges).gradient_bytes();
  s.sender_gradient_exists = grad(senders) >= 0;
  s.receiver_gradient_exists = grad(receivers) >= 0;
  s.edge_gradient_exists = grad(edges) >= 0;
  const int activation_bytes = tensor(hidden).element_bytes;
  auto partial = [&](const Op& linear) {
    const Tensor& w = tensor(linear.inputs[1]);
    return w.rows * w.cols * activation_bytes;
  };
  s.first_weight_partial = partial(*first);
  s.second_weight_partial = partial(*second);

  // The machine's buffers the blocks start from, by what they hold.
  using V = EdgeBlockValue;
  auto input_buffer = [&](V value) -> int {
    switch (value) {
      case V::output_gradient: return output_gradient;
      case V::senders: return current(senders);
      case V::receivers: return current(receivers);
      case V::edges: return current(edges);
      case V::sender_gradient: return grad(senders);
      case V::receiver_gradient: return grad(receivers);
      case V::edge_gradient: return grad(edges);
      default: return -1;
    }
  };
  auto tensor_of = [&](V value) -> TensorId {
    switch (value) {
      case V::output_gradient:
      case V::output_gradient_slice: return item.output;
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
  };
  for (V value : {V::senders, V::receivers, V::edges, V::gathered_senders, V::gathered_receivers, V::edge_slice,
                  V::hidden, V::silu, V::pre_norm})
    if (compiler_recomputable(tensor_of(value))) s.compiler_recomputable.push_back(value);
  // Memory at a place of XLA's order: the machine's buffers less the inputs
  // freed by then (set aside for the sample), plus the blocks' own live there.
  auto sample_at = [&](const EdgeBlockPeak& place) {
    std::vector<int> inputs_live, made;
    for (const EdgeBlockPeak::Live& l : place.live) {
      const int b = l.block < 0 ? input_buffer(l.value) : -1;
      if (b >= 0)
        inputs_live.push_back(b);
      else
        made.push_back(allocate(l.bytes, is_gradient(l.value) ? kGradients : kActivations, 1, tensor_of(l.value)));
    }
    std::vector<std::pair<int, int>> set_aside;  // buffer, its references
    for (V value : {V::output_gradient, V::senders, V::receivers, V::edges, V::sender_gradient, V::receiver_gradient,
                    V::edge_gradient}) {
      const int b = input_buffer(value);
      if (b < 0 || std::count(inputs_live.begin(), inputs_live.end(), b) > 0) continue;
      if (std::any_of(set_aside.begin(), set_aside.end(), [&](const auto& a) { return a.first == b; })) continue;
      Buffer& x = buffer(b);
      set_aside.push_back({b, x.refs});
      x.refs = 0;
      live_[x.category] -= x.bytes;
      if (x.compiler_recomputable) live_recomputable_ -= x.bytes;
    }
    using St = EdgeBlockStep;
    const St step = place.step;
    const bool recomputing = step == St::copy_senders || step == St::copy_receivers || step == St::gather_senders ||
                             step == St::gather_receivers || step == St::slice_edges || step == St::first_linear ||
                             step == St::second_linear;
    const Op& op =
        step == St::copy_senders || step == St::gather_senders || step == St::scatter_senders            ? *gathers[0]
        : step == St::copy_receivers || step == St::gather_receivers || step == St::scatter_receivers    ? *gathers[1]
        : step == St::slice_edges || step == St::split_input_gradient || step == St::write_edge_gradient ? *concat
        : step == St::first_linear || step == St::first_weight_gradient || step == St::first_weight_update ||
                step == St::first_linear_backward
            ? *first
        : step == St::second_linear || step == St::second_weight_gradient || step == St::second_weight_update ? *second
        : step == St::second_linear_backward                                                                  ? *silu
                                                                                                              : *norm;
    sample_op(recomputing ? Pass::recompute : Pass::backward, op, place.block);
    for (int b : made) release(b);
    for (const auto& [b, refs] : set_aside) {
      Buffer& x = buffer(b);
      x.refs = refs;
      live_[x.category] += x.bytes;
      if (x.compiler_recomputable) live_recomputable_ += x.bytes;
    }
  };
  // Where the floor peaks, then where the memory does (the report places the
  // peak at the first sample of the most memory).
  const EdgeBlockBackward scheduled = edge_block_backward(s);
  sample_at(scheduled.floor);
  if (scheduled.floor.added != scheduled.peak.added || scheduled.floor.step != scheduled.peak.step ||
      scheduled.floor.block != scheduled.peak.block)
    sample_at(scheduled.peak);
  return true;
}

}  // namespace actmem::detail

// Lowering (memory_machine.h): which buffers an op's execution makes and how
// many bytes each holds: a tensor's rows in a block, its gradient's dtype,
// outputs sized like an input, fused producers with no buffer of their own,
// and the layout copies and tiled targets of XLA:TPU.

#include "simulate/memory_machine.h"

#include <algorithm>

namespace actmem::detail {

// Bytes of a tensor in this execution: inside a block, the tensors the
// block makes (its output included) have the block's rows.
std::int64_t MemoryMachine::bytes_of(TensorId t, std::int64_t block_rows) const {
  const Tensor& x = tensor(t);
  const bool per_block = block_internal_[static_cast<std::size_t>(t)] || block_output_[static_cast<std::size_t>(t)];
  return block_rows > 0 && per_block ? block_rows * x.cols * x.element_bytes : x.bytes();
}

std::int64_t MemoryMachine::gradient_bytes_of(TensorId t, std::int64_t block_rows) const {
  const Tensor& x = tensor(t);
  return x.gradient_element_bytes > 0 ? bytes_of(t, block_rows) / x.element_bytes * x.gradient_element_bytes
                                      : bytes_of(t, block_rows);
}

std::int64_t MemoryMachine::output_bytes(const Op& op, const OpMemoryRule& rule, TensorId t,
                                         std::int64_t block_rows) const {
  // A scanned rollout carries its frames in float32, but one whose steps
  // are not checkpointed saves each step's for the backward in the
  // activation dtype, the only one its backward reads them in (J9).
  if (stacking_residuals_ && op.kind == OpKind::next_input)
    return tensor(t).rows * tensor(t).cols * element_bytes(g_.run().dtype);
  return rule.output_sized_like_input >= 0 && t == op.outputs.front()
             ? bytes_of(op.inputs[static_cast<std::size_t>(rule.output_sized_like_input)], block_rows)
             : bytes_of(t, block_rows);
}

// The share of an edge-update op's rows a block runs (edge-update ops:
// rows of their edge-shaped output).
double MemoryMachine::block_scale(const Op& op, std::int64_t block_rows) const {
  return block_rows > 0 ? static_cast<double>(block_rows) / static_cast<double>(tensor(op.outputs.front()).rows) : 1.0;
}

TensorId step_target(const CostGraph& graph, const Op& op) {
  const bool reads_target =
      op.kind == OpKind::mse_loss && op.inputs.size() > 1 && graph.tensor(op.inputs[1]).role == TensorRole::input;
  return reads_target ? op.inputs[1] : -1;
}

std::int64_t scanned_target_bytes(const CostGraph& graph, TensorId target) {
  const Tensor& t = graph.tensor(target);
  const std::int64_t batch = graph.run().batch;  // a node-major target is [nodes × batch, channels]
  return t.tiled_planes ? t.bytes() : tpu_tiled_bytes(t.rows / batch, t.cols, batch, t.element_bytes);
}

bool aligned_edge_norm(const CostGraph& graph, const MemoryProfile& profile, OpId op) {
  const Op& o = graph.op(op);
  if (!profile.aligned_edge_norms_copy_input || o.kind != OpKind::layer_norm) return false;
  const std::int64_t rows = graph.tensor(o.inputs[0]).rows;
  return graph.rows_tagged(rows, RowTag::layout_copied_edges) && rows % 8 == 0;
}

std::vector<int> edge_update_stages_reached(const CostGraph& graph, OpId op) {
  std::vector<int> stages;
  std::vector<TensorId> frontier{graph.op(op).outputs.front()}, seen;
  while (!frontier.empty()) {
    const TensorId t = frontier.back();
    frontier.pop_back();
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    seen.push_back(t);
    for (OpId c : graph.consumers(t)) {
      const Op& consumer = graph.op(c);
      if (consumer.kind == OpKind::layer_norm || consumer.kind == OpKind::add)
        frontier.push_back(consumer.outputs.front());
      else if (consumer.edge_update)
        stages.push_back(consumer.stage);
    }
  }
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  return stages;
}

std::vector<int> later_edge_update_stages_reached(const CostGraph& graph, OpId op) {
  std::vector<int> stages = edge_update_stages_reached(graph, op);
  std::erase_if(stages, [&](int s) { return s <= graph.op(op).stage; });
  return stages;
}

std::vector<int> blocked_edge_readers(const CostGraph& graph, const MemoryProfile& profile) {
  if (!profile.blocked_edge_updates_drop_norm_copies || !profile.aligned_edge_norms_copy_input) return {};
  std::vector<std::vector<int>> reaches;
  std::vector<int> readers;
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    if (!aligned_edge_norm(graph, profile, static_cast<OpId>(i))) continue;
    reaches.push_back(later_edge_update_stages_reached(graph, static_cast<OpId>(i)));
    readers.insert(readers.end(), reaches.back().begin(), reaches.back().end());
  }
  std::sort(readers.begin(), readers.end());
  readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
  for (const std::vector<int>& reach : reaches)
    if (!reach.empty() && !std::equal(reach.begin(), reach.end(),
                                      std::lower_bound(readers.begin(), readers.end(), reach.front()), readers.end()))
      return {};
  return readers;
}

// A LayerNorm over the mesh edges, their count a multiple of 8, makes a
// copy of its input in another layout (J31), none where a later stage's
// edge update that its output reaches runs in blocks (J35). Where another
// edge update reads its output the copy is kept for the backward; where
// none does, the copy's one reader is the fusion writing the output, and
// it dies as the op ends (J40): in the forward pass (J31), in a
// recomputation (J34), a step-checkpointed loop body's included (J38). A
// rollout's backward loop without step checkpoints keeps it (J31).
MemoryMachine::NormCopy MemoryMachine::norm_copy(OpId id, Pass pass) const {
  if (!aligned_edge_norm(g_, profile_, id)) return NormCopy::none;
  const Op& op = g_.op(id);
  if (current_[static_cast<std::size_t>(op.inputs[0])] < 0 || reaches_blocked_stage(id)) return NormCopy::none;
  if (read_by_edge_update(id)) return NormCopy::kept;
  const bool dies = pass == Pass::forward || (profile_.unread_norm_copy_dies_at_norm && !stacking_residuals_);
  return dies ? NormCopy::transient : NormCopy::kept;
}

std::vector<std::pair<OpId, std::vector<int>>> conditioned_ops(const CostGraph& graph, const MemoryProfile& profile) {
  std::vector<std::pair<OpId, std::vector<int>>> ops;
  if (!profile.blocked_edge_updates_drop_norm_copies) return ops;
  for (std::size_t i = 0; i < graph.ops().size(); ++i)
    if (aligned_edge_norm(graph, profile, static_cast<OpId>(i)))
      ops.emplace_back(static_cast<OpId>(i), later_edge_update_stages_reached(graph, static_cast<OpId>(i)));
  return ops;
}

bool MemoryMachine::reaches_blocked_stage(OpId op) const {
  if (!profile_.blocked_edge_updates_drop_norm_copies || blocked_edge_stages_.empty()) return false;
  const std::vector<int> reached = later_edge_update_stages_reached(g_, op);
  return std::any_of(reached.begin(), reached.end(), [&](int s) {
    return static_cast<std::size_t>(s) < blocked_edge_stages_.size() &&
           blocked_edge_stages_[static_cast<std::size_t>(s)] != 0;
  });
}

// Whether another edge update reads what `op` makes, through the
// LayerNorms and residual adds after it.
bool MemoryMachine::read_by_edge_update(OpId op) const { return !edge_update_stages_reached(g_, op).empty(); }

// The copies of its inputs op makes for itself alone, alive while it runs:
// a batched scatter's (J24), a LayerNorm's layout copy that only the
// fusion writing its output reads (`norm` transient, J40; the forward loop
// that stacks residuals keeps what its linearization names instead, J11),
// and DeepMind's per-variable loss's two float32 arrays in the targets'
// tiled layout, the residual frame and the prediction plus it (J42).
std::int64_t MemoryMachine::transient_input_copies(OpId id, Pass pass, NormCopy norm) const {
  const Op& op = g_.op(id);
  const OpMemoryRule& rule = profile_.rule(op.kind);
  std::int64_t copies = 0;
  if (rule.batched_copy_of_input >= 0 && g_.run().batch > 1 && !hoisted(id, pass)) {
    const TensorId input = op.inputs[static_cast<std::size_t>(rule.batched_copy_of_input)];
    if (current(input) >= 0) copies = buffer(current(input)).bytes;
  }
  if (norm == NormCopy::transient) copies += buffer(current(op.inputs[0])).bytes;
  if (op.kind == OpKind::mse_loss && profile_.loss_lays_out_prediction && op.inputs.size() > 1 &&
      tensor(op.inputs[1]).tiled_planes)
    copies += 2 * tensor(op.inputs[1]).bytes();
  return copies;
}

// True when t's producer is fused into its consumer (no buffer of its own).
bool MemoryMachine::made_fused(TensorId t) const {
  const OpId p = g_.producer(t);
  return p >= 0 && !profile_.rule(g_.op(p).kind).output_materialized;
}

}  // namespace actmem::detail

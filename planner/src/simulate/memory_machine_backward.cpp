// The memory machine's backward execution (memory_machine.h): items
// differentiated in reverse, regions recomputed then differentiated, blocks
// last first, and the gradients an op's backward makes and accumulates by
// the framework's rules. The order in which items run is the backward
// order's (memory_machine_backward_order.cpp).

#include "simulate/memory_machine.h"

#include <algorithm>
#include <cstddef>
#include <utility>

namespace actmem::detail {

void MemoryMachine::seed_gradients(const Op& op) {
  if (op.kind == OpKind::mse_loss) grad(op.outputs.front()) = allocate(4, kGradients, 1);
  if (op.kind == OpKind::next_input && g_.lifetime(op.outputs.front()).uses == 0)
    grad(op.outputs.front()) = allocate(tensor(op.outputs.front()).gradient_bytes(), kGradients, 1);
}

void MemoryMachine::recompute_items(const std::vector<Item>& items, std::int64_t block_rows, int block,
                                    LastReaders& readers, std::ptrdiff_t kept_entry) {
  for (const Item& item : items) {
    forward_item(item, /*saving=*/true, block_rows, block, Pass::recompute);
    if (readers.tensors.empty()) continue;
    const std::vector<OpId> ops = ops_of(item);
    for (std::size_t i = 0; i < readers.tensors.size(); ++i) {
      const TensorId t = readers.tensors[i];
      if (!any_reads(ops, t) || --readers.remaining[i] > 0) continue;
      const int b = current(t);
      if (kept_entry >= 0) {
        std::vector<int>& kept = kept_inputs_[static_cast<std::size_t>(kept_entry)].buffers;
        const auto held = std::find(kept.begin(), kept.end(), b);
        if (held == kept.end()) continue;
        kept.erase(held);
      }
      release(b);
    }
  }
}

// In a rollout that stacks residuals (J11), the step's backward ends where
// the items of the step before begin: the output gradients its linears
// outside every checkpoint held for their weight gradients are let go.
void MemoryMachine::backward(const std::vector<Item>& items, std::int64_t block_rows, int block) {
  const bool top_level = stacking_residuals_ && region_depth_ == 0 && block_rows == 0;
  // Outside every checkpoint and every scanned loop, the last stage's edge
  // embedding's backward waits (J32).
  const bool deferring = profile_.constant_embedding_backward_deferred && region_depth_ == 0 && block_rows == 0 &&
                         !stacking_residuals_ && !in_loop_body_;
  TopLevelBranch branch;
  if (profile_.complete_branch_backward_first && region_depth_ == 0 && block_rows == 0 && !stacking_residuals_ &&
      !in_loop_body_)
    branch = take_top_level_branch(items);
  int step = -1;
  std::vector<std::vector<int>> slices;  // per item: its step's slices of what it keeps (J45)
  for (auto it = items.rbegin(); it != items.rend(); ++it) {
    const Item& item = *it;
    const auto index = static_cast<std::size_t>(items.rend() - it) - 1;
    if (!branch.ops.empty() && index < branch.before) run_top_level_branch(branch);
    if (!branch.in_branch.empty() && branch.in_branch[index]) continue;
    if (deferring && item.kind == Item::Kind::op && deferrable(item.op)) {
      const Op& op = g_.op(item.op);
      for (TensorId t : op.outputs) deferred_threshold_ = std::max(deferred_threshold_, gradient_bytes_of(t, 0));
      deferred_.push_back({item.op, std::move(saved_.back())});
      saved_.pop_back();
      continue;
    }
    if (top_level) {
      const int item_step = g_.op(first_op(item)).step;
      if (item_step != step) {
        release_weight_gradient_operands();
        begin_step_backward(step);
        slices = slice_kept_inputs(items, item_step);
      }
      step = item_step;
    }
    switch (item.kind) {
      case Item::Kind::op: backward_op(item.op, block_rows, block); break;
      case Item::Kind::region: backward_region(item, 0, block); break;
      case Item::Kind::blocks: {
        const InEdgeBlocks in_blocks(edge_blocks_depth_);
        backward_blocks(item);
        break;
      }
    }
    if (index < slices.size())
      for (int b : slices[index]) release(b);
  }
  if (top_level) {
    release_weight_gradient_operands();
    begin_step_backward(step);
  }
  if (deferring && run_pending_at_end_) run_pending();
}

// Recompute the region's forward keeping what backward needs, then
// differentiate through it; finally let go of what it kept. Saved tensors
// are freed one by one as their backward ops run.
void MemoryMachine::backward_region(const Item& item, std::int64_t block_rows, int block) {
  const bool outer_loop_body = in_loop_body_;
  region_backward_from_.push_back(allocated_bytes_);
  std::vector<int> step_inputs;
  if (item.loop_body) {
    in_loop_body_ = true;
    if (offload_step_inputs_) fetch_offloaded_inputs();
    if (profile_.loop_body_holds_step_inputs) step_inputs = hold_loop_body_step_inputs(item);
    slice_step_target(ops_of(item.children));
    on_loop_body_start();
  }
  const int saved_context = context_;
  begin_context(item.children);
  // A nested (reentrant) checkpoint holds its recomputed outputs through
  // its own backward: one extra use that no op consumes.
  const bool hold_outputs = region_depth_ > 0 && profile_.nested_recompute_keeps_outputs;
  if (hold_outputs)
    for (TensorId t : item.outputs)
      if (made_here(t)) ++uses_[static_cast<std::size_t>(t)];
  std::vector<int> held_outputs;
  if (profile_.complete_branch_backward_first && region_depth_ == 0 && !in_loop_body_ && !stacking_residuals_ &&
      block_rows == 0) {
    recompute_and_backward(item, block_rows, block, saved_context);
  } else {
    recomputing_step_ = item.loop_body;
    ++recompute_depth_;
    forward(item.children, /*saving=*/true, block_rows, block, Pass::recompute);
    --recompute_depth_;
    recomputing_step_ = false;
    if (hold_outputs)
      for (TensorId t : item.outputs)
        if (made_here(t) && current(t) >= 0) held_outputs.push_back(current(t));
    context_ = saved_context;
    ++region_depth_;
    backward(item.children, block_rows, block);
    --region_depth_;
  }
  for (int b : held_outputs) release(b);
  release_kept(1, /*skipped=*/false);
  for (int b : step_inputs) release(b);
  if (item.loop_body && target_slice_ >= 0) {  // the step's loss had no backward
    release(target_slice_);
    target_slice_ = -1;
  }
  in_loop_body_ = outer_loop_body;
  region_backward_from_.pop_back();
}

void MemoryMachine::backward_blocks(const Item& item) {
  // Under XLA the blocks' instructions interleave (J17): their peak is
  // sampled from XLA's order; running them one after another below then
  // only leaves behind what they leave.
  const bool sampled = profile_.blocks_backward_list_scheduled && !quiet_ && sample_xla_blocked_backward(item);
  if (sampled) ++quiet_;
  backward_blocks_in_turn(item);
  if (sampled) --quiet_;
}

void MemoryMachine::backward_blocks_in_turn(const Item& item) {
  // The concat's backward hands each block a view of the output gradient.
  const int g = grad(item.output);
  grad(item.output) = -1;
  const std::vector<std::int64_t>& rows = item.block_rows;
  // Block b + 1 is a middle block of the same rows, just run: b runs alike.
  auto skippable = [&](std::size_t b) {
    return bulk_equal_blocks_ && b > 0 && b + 2 < rows.size() && rows[b + 1] == rows[b];
  };
  // Held input gradients of these blocks start here; what block b + 1
  // held, skipped blocks of its rows hold alike.
  const std::size_t held_from = held_block_gradients_.size();
  std::int64_t held_by_last_block = 0;
  for (std::size_t b = rows.size(); b-- > 0;) {
    if (skippable(b)) {
      std::size_t first = b;  // blocks first..b
      while (skippable(first - 1)) --first;
      const auto count = static_cast<std::int64_t>(b - first + 1);
      release_kept(count, /*skipped=*/true);
      if (held_by_last_block > 0)
        held_block_gradients_.push_back(allocate(count * held_by_last_block, kGradients, 1, item.output));
      repeat_block_cost(count);
      b = first;
      continue;
    }
    mark_block_cost();
    if (g >= 0) retain(g);
    grad(item.output) = g;
    const std::size_t held_before = held_block_gradients_.size();
    backward_region(item, rows[b], static_cast<int>(b));
    held_by_last_block = 0;
    for (std::size_t i = held_before; i < held_block_gradients_.size(); ++i)
      held_by_last_block += buffer(held_block_gradients_[i]).bytes;
    if (grad(item.output) >= 0) release(grad(item.output));
    grad(item.output) = -1;
  }
  if (g >= 0) release(g);
  for (std::size_t i = held_from; i < held_block_gradients_.size(); ++i) release(held_block_gradients_[i]);
  held_block_gradients_.resize(held_from);
}

void MemoryMachine::backward_op(OpId id, std::int64_t block_rows, int block) {
  std::vector<int> saved = std::move(saved_.back());
  saved_.pop_back();
  backward_op(id, std::move(saved), block_rows, block);
}

void MemoryMachine::backward_op(OpId id, std::vector<int> saved, std::int64_t block_rows, int block) {
  const Op& op = g_.op(id);
  const OpMemoryRule& rule = profile_.rule(op.kind);
  bool any_grad = false;
  for (TensorId t : op.outputs) any_grad = any_grad || grad(t) >= 0;
  if (any_grad) {
    on_backward(op, block_scale(op, block_rows));
    std::int64_t transient = 0;
    contributions_.clear();
    for (TensorId t : op.inputs) transient += input_gradient(op, rule, t, block_rows);
    if (rule.backward_scratch_copies > 0)
      transient += rule.backward_scratch_copies * bytes_of(op.inputs.front(), block_rows);
    live_[kWorkspace] += transient;
    if (!quiet_) sample_op(Pass::backward, op, block);
    live_[kWorkspace] -= transient;
    for (const Contribution& c : contributions_) accumulate(c);
  }
  if (op.kind == OpKind::mse_loss && target_slice_ >= 0) {  // J44: read by the loss's backward
    release(target_slice_);
    target_slice_ = -1;
  }
  // XLA's backward loop of a rollout that stacks residuals computes the
  // weight gradients of the linears outside every checkpoint (loop carries)
  // after the rest of the step's backward, holding their output gradients
  // until then (J11); in a depth-first order those of the linears inside
  // checkpoints too (J52), or, as J54 tells them apart, those whose
  // operands lie shallow in the step's backward, holding their saved
  // inputs as well.
  bool weight_gradient_later = stacking_residuals_ && op.kind == OpKind::linear &&
                               (region_depth_ == 0 || parameter_gradients_last_) && block_rows == 0;
  if (weight_gradient_later && !region_backward_from_.empty() && weight_gradients_by_operand_depth() &&
      static_cast<std::size_t>(op.step) < assumed_step_backward_bytes_.size()) {
    const std::vector<int> inputs = weight_gradient_inputs(op, saved);
    weight_gradient_later = weight_gradient_waits(op, inputs);
    if (weight_gradient_later)
      for (int b : inputs) {
        retain(b);
        held_weight_gradient_operands_.push_back(b);
      }
  }
  for (TensorId t : op.outputs) {
    if (grad(t) >= 0) {
      if (weight_gradient_later)
        held_weight_gradient_operands_.push_back(grad(t));
      else
        release(grad(t));
    }
    grad(t) = -1;
  }
  for (int b : saved) release(b);
}

void MemoryMachine::hold_parameter_gradient(TensorId t) {
  param_grad_done_[static_cast<std::size_t>(t)] = 1;
  allocate(tensor(t).bytes(), kGradients, 1, t);
}

// The gradient of one input of `op` (rule: op's): a parameter gradient, or
// a contribution to an activation's gradient (contributions_). Returns the
// bytes alive only inside the op (a parameter gradient being summed).
std::int64_t MemoryMachine::input_gradient(const Op& op, const OpMemoryRule& rule, TensorId t,
                                           std::int64_t block_rows) {
  const Tensor& x = tensor(t);
  if (!x.requires_grad) return 0;
  if (x.role == TensorRole::parameter) {
    if (!param_grad_done_[static_cast<std::size_t>(t)]) {
      hold_parameter_gradient(t);
      return 0;
    }
    // Computed, then summed: in place (XLA), or out of place with old, new
    // and sum alive together (PyTorch).
    return x.bytes() * (profile_.accumulate_out_of_place ? 2 : 1);
  }
  if (made_fused(t)) return fused_input_gradient(t, block_rows);
  // A slice of the output's gradient is a view of it (PyTorch), or, where
  // slices are copies (XLA), a buffer of its own.
  const bool alias = rule.grads_alias_output && (!rule.grads_are_slices || profile_.slices_are_views);
  // A block's slice of a whole tensor (the edge latent it reads).
  const bool sliced = block_rows > 0 && rule.grads_are_slices && !block_internal_[static_cast<std::size_t>(t)];
  int c;
  if (alias) {
    c = grad(op.outputs.front());
    if (c < 0) return 0;
    retain(c);
  } else {
    c = allocate(sliced ? block_rows * x.cols * x.element_bytes : gradient_bytes_of(t, block_rows), kGradients, 1, t);
  }
  contributions_.push_back({t, c, sliced});
  return 0;
}

// A fused input was never materialised. A fused concat's gradient is one
// buffer of its size, and its parts' gradients are slices of it, read
// where they are consumed; through any other fused producer the kernel
// hands gradients to the producer's inputs directly.
// Returns the bytes alive only inside the op, as input_gradient().
std::int64_t MemoryMachine::fused_input_gradient(TensorId t, std::int64_t block_rows) {
  const Op& producer = g_.op(g_.producer(t));
  const OpMemoryRule& producer_rule = profile_.rule(producer.kind);
  // One whose gradient passes through (XLA's fused SiLU, J21) hands
  // its inputs the gradient this kernel writes for t.
  if (producer_rule.grads_alias_output && !producer_rule.grads_are_slices) {
    const int through = allocate(gradient_bytes_of(t, block_rows), kGradients, 1, t);
    for (TensorId u : producer.inputs) {
      if (!tensor(u).requires_grad) continue;
      retain(through);
      contributions_.push_back({u, through, false});
    }
    release(through);
    return 0;
  }
  if (!producer_rule.grads_are_slices) {
    std::int64_t transient = 0;
    for (TensorId u : producer.inputs) transient += input_gradient(producer, producer_rule, u, block_rows);
    return transient;
  }
  const int whole = allocate(gradient_bytes_of(t, block_rows), kGradients, 1, t);
  if (block_rows > 0 && profile_.block_input_gradients_held) {
    retain(whole);
    held_block_gradients_.push_back(whole);
  }
  for (TensorId u : producer.inputs) {
    if (!tensor(u).requires_grad) continue;
    retain(whole);
    contributions_.push_back(
        {u, whole, block_rows > 0 && !block_internal_[static_cast<std::size_t>(u)], gradient_bytes_of(u, block_rows)});
  }
  release(whole);
  return 0;
}

// Adds a gradient contribution into the tensor's gradient buffer.
void MemoryMachine::accumulate(const Contribution& contribution) {
  const TensorId t = contribution.tensor;
  int c = contribution.buffer;
  const bool sliced = contribution.sliced;
  // A block's slice of a whole tensor: its backward pads the gradient to
  // the full tensor (a fresh buffer), unless XLA adds it in place into an
  // existing gradient.
  if (sliced && !profile_.accumulate_out_of_place && grad(t) >= 0) {
    release(c);
    return;
  }
  if (sliced) {
    const int full = allocate(tensor(t).gradient_bytes(), kGradients, 1, t);
    if (!quiet_) sample_transient();
    release(c);
    c = full;
  }
  // J52: in a depth-first order the gradient of a hoisted op's output is
  // read only by that op's parameter gradients, computed last, which read
  // it as a part of the whole: the whole lives until then.
  if (const OpId producer = g_.producer(t); parameter_gradients_last_ && contribution.part_bytes > 0 && !sliced &&
                                            producer >= 0 && loop_invariant_[static_cast<std::size_t>(producer)]) {
    retain(c);
    held_weight_gradient_operands_.push_back(c);
  }
  int& b = grad(t);
  if (b < 0) {
    // Where slices are copies (XLA), the first gradient of a part of a
    // fused concat is split off into a buffer of its own, so that the whole
    // dies with its other parts' readers (J18).
    if (!profile_.slices_are_views && contribution.part_bytes > 0 && contribution.part_bytes < buffer(c).bytes) {
      b = allocate(contribution.part_bytes, kGradients, 1, t);
      release(c);
      return;
    }
    b = c;
    return;
  }
  if (!profile_.accumulate_out_of_place) {
    release(c);
    return;
  }
  const int sum = allocate(tensor(t).gradient_bytes(), kGradients, 1, t);
  if (!quiet_) sample_transient();
  release(b);
  release(c);
  b = sum;
}

}  // namespace actmem::detail

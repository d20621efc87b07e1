// The memory machine's core (memory_machine.h): its buffers, its contexts
// and the forward execution of schedule items. What a rule decides it asks
// of the other parts: the bytes of what an op writes (lowering), what an op
// keeps for its backward (retention), what a scanned rollout holds.

#include "simulate/memory_machine.h"

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

namespace actmem::detail {

TensorState::TensorState(std::size_t tensors, bool first_parameter_gradients)
    : current(tensors, -1),
      grad(tensors, -1),
      uses(tensors, 0),
      produced_in(tensors, -1),
      block_internal(tensors, 0),
      block_output(tensors, 0),
      param_grad_done(tensors, first_parameter_gradients ? 0 : 1) {}

void TensorState::reset(const std::vector<TensorId>& tensors, bool first_parameter_gradients) {
  for (TensorId t : tensors) {
    const auto i = static_cast<std::size_t>(t);
    current[i] = grad[i] = produced_in[i] = -1;
    uses[i] = 0;
    block_internal[i] = block_output[i] = 0;
    param_grad_done[i] = first_parameter_gradients ? 0 : 1;
  }
}

MemoryMachine::MemoryMachine(const CostGraph& graph, TensorState* shared)
    : g_(graph),
      profile_(memory_profile(graph.run(), graph.model().implementation)),
      own_(shared ? TensorState{} : TensorState(graph.tensors().size(), true)),
      current_(shared ? shared->current : own_.current),
      grad_(shared ? shared->grad : own_.grad),
      uses_(shared ? shared->uses : own_.uses),
      produced_in_(shared ? shared->produced_in : own_.produced_in),
      block_internal_(shared ? shared->block_internal : own_.block_internal),
      block_output_(shared ? shared->block_output : own_.block_output),
      param_grad_done_(shared ? shared->param_grad_done : own_.param_grad_done) {}

void MemoryMachine::set_up(MachineSetup setup) {
  in_loop_body_ = setup.loop_body;
  offload_step_inputs_ = setup.offload_step_inputs;
  parameter_gradients_last_ = setup.parameter_gradients_last;
  bulk_equal_blocks_ = setup.bulk_equal_blocks;
  blocked_edge_stages_ = std::move(setup.blocked_edge_stages);
  run_pending_at_end_ = !setup.pending_left_to_caller;
  pending_elsewhere_ = setup.pending_elsewhere;
}

void MemoryMachine::release_losses() {
  for (int b : losses_) release(b);
  losses_.clear();
}

// ---- a part of a step, run by a user (the solver's stage replay) ----

void MemoryMachine::begin_part() { context_ = context_count_ = 1; }

void MemoryMachine::forward_part(const std::vector<Item>& items, bool saving, Pass pass, bool region_recomputation,
                                 bool step_recomputation) {
  recomputing_step_ = step_recomputation;
  if (region_recomputation) ++recompute_depth_;
  forward(items, saving, 0, -1, pass);
  if (region_recomputation) --recompute_depth_;
  recomputing_step_ = false;
}

void MemoryMachine::recompute_part(const std::vector<Item>& items, LastReaders& readers) {
  ++recompute_depth_;
  recompute_items(items, 0, -1, readers, -1);
  --recompute_depth_;
}

void MemoryMachine::backward_part(const std::vector<Item>& items, bool in_region) {
  if (in_region) ++region_depth_;
  backward(items, 0, -1);
  if (in_region) --region_depth_;
}

int MemoryMachine::allocate(std::int64_t bytes, Category category, int refs, TensorId tensor) {
  int id;
  if (!free_slots_.empty()) {
    id = free_slots_.back();
    free_slots_.pop_back();
  } else {
    id = static_cast<int>(buffers_.size());
    buffers_.emplace_back();
  }
  const bool recomputable = category == kActivations && tensor >= 0 && compiler_recomputable(tensor);
  if (weight_gradients_by_operand_depth() && edge_blocks_depth_ == 0)  // J54's positions, read only there
    (off_chain_gradient(category, tensor) ? off_chain_bytes_ : allocated_bytes_) += bytes;
  buffers_[static_cast<std::size_t>(id)] = {bytes, refs, category, tensor, recomputable, false, allocated_bytes_};
  live_[category] += bytes;
  if (recomputable) live_recomputable_ += bytes;
  return id;
}

void MemoryMachine::release(int id) {
  Buffer& b = buffer(id);
  if (--b.refs > 0) return;
  if (b.refs < 0)
    throw std::logic_error("memory machine: buffer released twice" +
                           (b.tensor >= 0 ? " (" + tensor(b.tensor).name + ")" : std::string{}));
  live_[b.category] -= b.bytes;
  if (b.compiler_recomputable) live_recomputable_ -= b.bytes;
  free_slots_.push_back(id);
}

// An activation the compiler may recompute rather than keep: made by an op
// its rule says is cheap, or by an op that reads only the step's inputs and
// parameters, which are live throughout (J7).
bool MemoryMachine::compiler_recomputable(TensorId t) const {
  if (profile_.compiler_remat_limit_fraction <= 0) return false;
  const OpId p = g_.producer(t);
  if (p < 0) return false;
  const Op& op = g_.op(p);
  return profile_.rule(op.kind).compiler_recomputable ||
         std::all_of(op.inputs.begin(), op.inputs.end(), [&](TensorId u) { return g_.producer(u) < 0; });
}

std::int64_t MemoryMachine::live_compiler_recomputable(const Op* op) const {
  std::int64_t bytes = live_recomputable_;
  if (op == nullptr) return bytes;
  // Sampled at every op: no allocation; an op's few tensors are compared
  // pairwise so that a buffer it reads twice counts once.
  const std::span<const TensorId> lists[] = {op->inputs, op->outputs};
  auto buffer_at = [&](std::size_t list, std::size_t i) { return current_[static_cast<std::size_t>(lists[list][i])]; };
  for (std::size_t l = 0; l < 2; ++l)
    for (std::size_t i = 0; i < lists[l].size(); ++i) {
      const int b = buffer_at(l, i);
      if (b < 0 || !buffers_[static_cast<std::size_t>(b)].compiler_recomputable) continue;
      bool seen = false;
      for (std::size_t m = 0; m <= l && !seen; ++m)
        for (std::size_t j = 0; j < (m < l ? lists[m].size() : i) && !seen; ++j) seen = buffer_at(m, j) == b;
      if (!seen) bytes -= buffers_[static_cast<std::size_t>(b)].bytes;
    }
  return bytes;
}

std::vector<PeakBuffer> MemoryMachine::live_buffers() const {
  static const char* const kNames[] = {"activations", "gradients", "workspace"};
  std::vector<PeakBuffer> out;
  for (const Buffer& b : buffers_)
    if (b.refs > 0)
      out.push_back({b.tensor < 0 ? std::string{} : (b.stacked ? "residuals stacked by " : "") + tensor(b.tensor).name,
                     kNames[b.category], b.bytes});
  std::stable_sort(out.begin(), out.end(), [](const PeakBuffer& a, const PeakBuffer& b) { return a.bytes > b.bytes; });
  return out;
}

// References let go by blocks run in bulk, which are never the last.
void MemoryMachine::drop_references(int id, std::int64_t count) {
  Buffer& b = buffer(id);
  if (b.refs <= count) throw std::logic_error("memory machine: an edge block run in bulk would free a buffer");
  b.refs -= static_cast<int>(count);
}

void MemoryMachine::begin_context(const std::vector<Item>& items) {
  context_ = ++context_count_;
  mark_produced(items);
  count_uses(items, 1);
}

void MemoryMachine::mark_produced(const std::vector<Item>& items) {
  for (const Item& item : items) {
    if (item.kind == Item::Kind::op) {
      for (TensorId t : g_.op(item.op).outputs) {
        produced_in_[static_cast<std::size_t>(t)] = context_;
        uses_[static_cast<std::size_t>(t)] = 0;
      }
    } else {
      mark_produced(item.children);
    }
  }
}

void MemoryMachine::count_uses(const std::vector<Item>& items, std::int64_t repeat) {
  for (const Item& item : items) {
    if (item.kind == Item::Kind::op) {
      for (TensorId t : g_.op(item.op).inputs) {
        if (produced_in_[static_cast<std::size_t>(t)] != context_) continue;
        // Block-internal tensors are counted per block instance.
        uses_[static_cast<std::size_t>(t)] +=
            static_cast<int>(block_internal_[static_cast<std::size_t>(t)] ? 1 : repeat);
      }
      // A hold is one more use (never inside blocks: Op::releases_held).
      for (TensorId t : g_.op(item.op).releases_held)
        if (produced_in_[static_cast<std::size_t>(t)] == context_)
          uses_[static_cast<std::size_t>(t)] += static_cast<int>(repeat);
    } else if (item.kind == Item::Kind::blocks) {
      for (TensorId t : item.internal) block_internal_[static_cast<std::size_t>(t)] = 1;
      block_output_[static_cast<std::size_t>(item.output)] = 1;
      count_uses(item.children, repeat * static_cast<std::int64_t>(item.block_rows.size()));
    } else {
      count_uses(item.children, repeat);
    }
  }
}

void MemoryMachine::forward(const std::vector<Item>& items, bool saving, std::int64_t block_rows, int block,
                            Pass pass) {
  for (const Item& item : items) forward_item(item, saving, block_rows, block, pass);
}

void MemoryMachine::forward_item(const Item& item, bool saving, std::int64_t block_rows, int block, Pass pass) {
  switch (item.kind) {
    case Item::Kind::op: forward_op(item.op, saving, block_rows, block, pass); break;
    case Item::Kind::region:
      if (item.loop_body && offload_step_inputs_)
        keep_inputs_offloaded(saving, item.external_inputs);
      else
        keep_inputs(saving, item.external_inputs);
      forward(item.children, false, block_rows, block, pass);
      break;
    case Item::Kind::blocks: {
      const InEdgeBlocks in_blocks(edge_blocks_depth_);
      forward_blocks(item, saving, pass);
      break;
    }
  }
}

void MemoryMachine::keep_inputs(bool saving, const std::vector<TensorId>& inputs, std::int64_t blocks) {
  if (!saving) return;
  Kept kept{{}, blocks, {}};
  for (TensorId t : inputs) {
    const int b = current(t);
    if (b < 0) continue;
    buffer(b).refs += static_cast<int>(blocks);
    kept.buffers.push_back(b);
  }
  kept_inputs_.push_back(std::move(kept));
}

// `blocks` checkpoint executions' kept inputs let go, innermost first; by
// blocks run in bulk (`skipped`) they are never the last references.
void MemoryMachine::release_kept(std::int64_t blocks, bool skipped) {
  while (blocks > 0) {
    Kept& k = kept_inputs_.back();
    const std::int64_t n = std::min(blocks, k.blocks);
    for (int b : k.buffers) {
      if (skipped) {
        drop_references(b, n);
      } else {
        for (std::int64_t i = 0; i < n; ++i) release(b);
      }
    }
    k.blocks -= n;
    blocks -= n;
    if (k.blocks == 0) kept_inputs_.pop_back();
  }
}

void MemoryMachine::forward_op(OpId id, bool saving, std::int64_t block_rows, int block, Pass pass) {
  const Op& op = g_.op(id);
  const OpMemoryRule& rule = profile_.rule(op.kind);
  if (pass == Pass::recompute && recompute_depth_ > 0) deferred_set_off(op, rule, block_rows);
  on_forward(op, block_scale(op, block_rows), pass);
  for (TensorId t : op.outputs) {
    // In a block, the edge update's output is held for the concat of blocks.
    const bool block_output = collecting_block_output_ && !block_internal_[static_cast<std::size_t>(t)];
    const int refs = block_output ? 1 : uses_[static_cast<std::size_t>(t)];
    // A loop-invariant op's output in a later step is the first step's,
    // hoisted out of the loop: no memory of its own (J11).
    const std::int64_t bytes = hoisted(id, pass) ? 0 : output_bytes(op, rule, t, block_rows);
    current(t) = rule.output_materialized ? allocate(bytes, kActivations, refs + 1, t) : -1;
  }
  const NormCopy norm =
      saving && !(stacking_residuals_ && pass == Pass::forward) ? norm_copy(id, pass) : NormCopy::none;
  const std::int64_t copies = transient_input_copies(id, pass, norm);
  live_[kWorkspace] += copies;
  if (!quiet_) sample_op(pass, op, block);
  live_[kWorkspace] -= copies;
  if (saving) save_for_backward(id, pass, norm);
  // A fused op reads its inputs when its consumer runs (release_input()).
  if (rule.output_materialized)
    for (TensorId t : op.inputs) release_input(t);
  release_holds(op);
  // The caller holds each loss until the backward pass starts from it (a
  // recomputed loss is not handed to the caller).
  if (op.kind == OpKind::mse_loss && pass != Pass::recompute && current(op.outputs.front()) >= 0) {
    retain(current(op.outputs.front()));
    losses_.push_back(current(op.outputs.front()));
  }
  // The +1 taken at allocation: outputs nobody holds die now.
  for (TensorId t : op.outputs)
    if (current(t) >= 0) release(current(t));
}

// One use of an op's input is over. A fused input was never materialised:
// its producer's inputs are read now, inside the consumer's kernel.
void MemoryMachine::release_input(TensorId t) {
  if (made_fused(t)) {
    for (TensorId u : g_.op(g_.producer(t)).inputs) release_input(u);
    return;
  }
  if (!made_here(t) || current(t) < 0) return;
  if (!block_internal_[static_cast<std::size_t>(t)]) --uses_[static_cast<std::size_t>(t)];
  release(current(t));
}

// The holds that end with `op` (Op::releases_held) let go of their tensors
// made in this execution. A held tensor the profile fuses has no buffer to
// hold: its producer's inputs are released by its consumer as always.
void MemoryMachine::release_holds(const Op& op) {
  for (TensorId t : op.releases_held) {
    if (!made_here(t)) continue;
    --uses_[static_cast<std::size_t>(t)];
    if (current(t) >= 0 && !made_fused(t)) release(current(t));
  }
}

// B blocks, each a checkpoint over the edge update, then the concat.
//
// Blocks of equal rows run alike, so most of them need not run op by op:
// - Forward: a block adds its output chunk, held for the concat, and uses
//   its inputs once more; inputs are freed at their last use, in the last
//   block. So a block followed by a block of the same rows that is not the
//   last peaks lower than that one: only what it leaves behind is applied
//   (skip_forward_blocks()), and its compute is accounted.
// - Backward (last block first): the first block creates the gradient
//   accumulators and the parameter gradients, the last may free the kept
//   inputs, and every block between leaves memory as it found it, peaking
//   alike for equal rows. So of a run of equal middle blocks the first runs
//   and the others only let go of their kept inputs and repeat its compute.
// tests/simulator_test.cpp checks bulk runs against block-by-block ones.
void MemoryMachine::forward_blocks(const Item& item, bool saving, Pass pass) {
  std::vector<int> outputs;
  const std::vector<std::int64_t>& rows = item.block_rows;
  auto skippable = [&](std::size_t b) { return bulk_equal_blocks_ && b + 2 < rows.size() && rows[b + 1] == rows[b]; };
  for (std::size_t b = 0; b < rows.size();) {
    if (skippable(b)) {
      std::size_t end = b;  // blocks b..end-1, all of rows[b]
      while (skippable(end)) ++end;
      const auto count = static_cast<std::int64_t>(end - b);
      keep_inputs(saving, item.external_inputs, count);
      outputs.push_back(skip_forward_blocks(item, rows[b], count, pass));
      b = end;
      continue;
    }
    keep_inputs(saving, item.external_inputs);
    collecting_block_output_ = true;
    forward(item.children, false, rows[b], static_cast<int>(b), pass);
    collecting_block_output_ = false;
    outputs.push_back(current(item.output));  // held (one reference) until the concat
    ++b;
  }
  const Tensor& out = tensor(item.output);
  current(item.output) = allocate(out.bytes(), kActivations, uses_[static_cast<std::size_t>(item.output)] + 1);
  if (!quiet_) sample_concat(pass, item);
  for (int b : outputs)
    if (b >= 0) release(b);
  release(current(item.output));
}

// What `count` blocks' ops leave behind, without running them: their
// output chunks (as one buffer), and `count` uses of each input made in
// this context (never the last: that is in the last block).
int MemoryMachine::skip_forward_blocks(const Item& item, std::int64_t block_rows, std::int64_t count, Pass pass) {
  int chunks = -1;
  for (const Item& child : item.children) {
    const Op& op = g_.op(child.op);
    on_forward(op, block_scale(op, block_rows) * static_cast<double>(count), pass);
    for (TensorId t : op.inputs) {
      if (!made_here(t) || current(t) < 0 || block_internal_[static_cast<std::size_t>(t)]) continue;
      uses_[static_cast<std::size_t>(t)] -= static_cast<int>(count);
      drop_references(current(t), count);
    }
    if (std::find(op.outputs.begin(), op.outputs.end(), item.output) != op.outputs.end()) {
      const OpMemoryRule& rule = profile_.rule(op.kind);
      if (rule.output_materialized)
        chunks = allocate(count * output_bytes(op, rule, item.output, block_rows), kActivations, 1, item.output);
    }
  }
  current(item.output) = chunks;
  return chunks;
}

OpId MemoryMachine::first_op(const Item& item) {
  if (item.kind == Item::Kind::op) return item.op;
  return item.kind == Item::Kind::blocks ? item.first_op : first_op(item.children.front());
}

}  // namespace actmem::detail

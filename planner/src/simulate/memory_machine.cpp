#include "simulate/memory_machine.h"

#include <algorithm>
#include <cstddef>
#include <span>
#include <stdexcept>
#include <string>

#include "simulate/edge_block_backward.h"
#include "simulate/step_costs.h"

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

// ---- buffers ----------------------------------------------------------------

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

// Bytes of a tensor in this execution: inside a block, the tensors the
// block makes (its output included) have the block's rows.
std::int64_t MemoryMachine::bytes_of(TensorId t, std::int64_t block_rows) const {
  const Tensor& x = tensor(t);
  const bool per_block = block_internal_[static_cast<std::size_t>(t)] || block_output_[static_cast<std::size_t>(t)];
  return block_rows > 0 && per_block ? block_rows * x.cols * x.element_bytes : x.bytes();
}

void MemoryMachine::seed_gradients(const Op& op) {
  if (op.kind == OpKind::mse_loss) grad(op.outputs.front()) = allocate(4, kGradients, 1);
  if (op.kind == OpKind::next_input && g_.lifetime(op.outputs.front()).uses == 0)
    grad(op.outputs.front()) = allocate(tensor(op.outputs.front()).gradient_bytes(), kGradients, 1);
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

// ---- contexts -----------------------------------------------------------------

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

// ---- forward ------------------------------------------------------------------

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

bool MemoryMachine::any_reads(const std::vector<OpId>& ops, TensorId t) const {
  return std::any_of(ops.begin(), ops.end(), [&](OpId id) {
    const auto& in = g_.op(id).inputs;
    return std::find(in.begin(), in.end(), t) != in.end();
  });
}

MemoryMachine::LastReaders MemoryMachine::last_readers(const std::vector<Item>& items,
                                                       const std::vector<TensorId>& inputs) const {
  LastReaders readers;
  if (!profile_.kept_inputs_freed_at_last_reader) return readers;
  for (TensorId t : inputs) {
    if (current(t) < 0 || kept_input_reader_stage(g_, profile_, t) < 0) continue;
    int reading = 0;
    for (const Item& item : items) reading += any_reads(ops_of(item), t) ? 1 : 0;
    if (reading == 0) continue;
    readers.tensors.push_back(t);
    readers.remaining.push_back(reading);
  }
  return readers;
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

// A step checkpoint's kept inputs offloaded to host memory: no hold on the
// device's buffers, which die at their last reader in the forward loop.
void MemoryMachine::keep_inputs_offloaded(bool saving, const std::vector<TensorId>& inputs) {
  if (!saving) return;
  Kept kept;
  for (TensorId t : inputs)
    if (const int b = current(t); b >= 0) kept.offloaded.emplace_back(t, buffer(b).bytes);
  kept_inputs_.push_back(std::move(kept));
}

// As a loop body starts, its step's offloaded inputs come back to the
// device, held (as kept inputs) to the body's end; where XLA converts them
// to the activation dtype as they arrive, as that copy (J48).
void MemoryMachine::fetch_offloaded_inputs() {
  Kept& kept = kept_inputs_.back();
  const int activation_bytes = element_bytes(g_.run().dtype);
  for (const auto& [t, bytes] : kept.offloaded) {
    const int element = tensor(t).element_bytes;
    const bool converted = profile_.offloaded_inputs_fetched_in_activation_dtype && element > activation_bytes;
    current(t) = allocate(converted ? bytes / element * activation_bytes : bytes, kActivations, 1, t);
    kept.buffers.push_back(current(t));
  }
  kept.offloaded.clear();
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
  // A copy of an input made for this op alone counts while it runs: a
  // batched scatter's (J24), a LayerNorm's layout copy that only the
  // fusion writing its output reads (J40; the forward loop that stacks
  // residuals keeps what its linearization names instead, J11), and
  // DeepMind's per-variable loss's two float32 arrays in the targets'
  // tiled layout, the residual frame and the prediction plus it (J42).
  std::int64_t copy = 0;
  if (rule.batched_copy_of_input >= 0 && g_.run().batch > 1 && !hoisted(id, pass)) {
    const TensorId input = op.inputs[static_cast<std::size_t>(rule.batched_copy_of_input)];
    if (current(input) >= 0) copy = buffer(current(input)).bytes;
  }
  const NormCopy norm =
      saving && !(stacking_residuals_ && pass == Pass::forward) ? norm_copy(id, pass) : NormCopy::none;
  if (norm == NormCopy::transient) copy += buffer(current(op.inputs[0])).bytes;
  if (op.kind == OpKind::mse_loss && profile_.grid_loss_lays_out_prediction && op.inputs.size() > 1 &&
      tensor(op.inputs[1]).tiled_planes)
    copy += 2 * tensor(op.inputs[1]).bytes();
  live_[kWorkspace] += copy;
  if (!quiet_) sample_op(pass, op, block);
  live_[kWorkspace] -= copy;
  if (saving) {
    std::vector<int> saved;
    if (stacking_residuals_ && pass == Pass::forward) {
      stack_residuals(id);
    } else {
      for (std::size_t i = 0; i < op.inputs.size(); ++i)
        if ((rule.saved_inputs & (1u << i)) && !linear_input_recomputed(id, op.inputs[i], pass))
          save(op.inputs[i], saved);
      if (norm == NormCopy::kept)
        saved.push_back(allocate(buffer(current(op.inputs[0])).bytes, kActivations, 1, op.inputs[0]));
      for (std::size_t i = 0; i < op.outputs.size(); ++i)
        if (rule.saved_outputs & (1u << i)) save(op.outputs[i], saved);
    }
    saved_.push_back(std::move(saved));
  }
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

// Keeps t for the backward pass; a fused t is recomputed there from its
// producer's inputs, so those are kept instead.
void MemoryMachine::save(TensorId t, std::vector<int>& saved) {
  if (made_fused(t)) {
    for (TensorId u : g_.op(g_.producer(t)).inputs) save(u, saved);
    return;
  }
  const int b = current(t);
  if (b < 0 || tensor(t).role != TensorRole::activation) return;
  retain(b);
  saved.push_back(b);
}

// ---- a rollout without step checkpoints (J11) -------------------------------

// An op is loop-invariant when it reads only parameters, model inputs
// that more than one step reads (the graph's constant features and
// indices: a step's own inputs are read in that step alone) and outputs
// of loop-invariant ops. JAX hoists such ops' residuals out of the loop.
void MemoryMachine::stack_linearization_residuals() {
  stacking_residuals_ = true;
  tensor_stacked_.assign(g_.tensors().size(), 0);
  std::vector<int> step_reading(g_.tensors().size(), -1);  // -2: several steps
  for (const Op& op : g_.ops())
    for (TensorId t : op.inputs) {
      int& s = step_reading[static_cast<std::size_t>(t)];
      s = s == -1 || s == op.step ? op.step : -2;
    }
  loop_invariant_.assign(g_.ops().size(), 0);
  for (std::size_t i = 0; i < g_.ops().size(); ++i) {
    const Op& op = g_.ops()[i];
    bool invariant = true;
    for (TensorId t : op.inputs) {
      const Tensor& x = tensor(t);
      if (x.role == TensorRole::parameter) continue;
      if (x.role == TensorRole::input)
        invariant = invariant && step_reading[static_cast<std::size_t>(t)] == -2;
      else
        invariant = invariant && loop_invariant_[static_cast<std::size_t>(g_.producer(t))];
    }
    loop_invariant_[i] = invariant;
  }
}

bool MemoryMachine::hoisted(OpId id, Pass pass) const {
  return stacking_residuals_ && pass == Pass::forward && g_.op(id).step > 0 &&
         loop_invariant_[static_cast<std::size_t>(id)];
}

// At batch > 1 the body of XLA's backward loop copies the stacked float32
// intermediates of a loop-invariant LayerNorm (hoisted out of the loop,
// J11) into another layout and holds the copies through the body, where
// the norm's output is an input a checkpoint keeps and its rows per sample
// are a multiple of 8 (J25).
void MemoryMachine::hold_hoisted_norm_residual_copies(const std::vector<Item>& items) {
  if (!stacking_residuals_ || g_.run().batch == 1 || !profile_.loop_body_copies_hoisted_norm_residuals) return;
  std::vector<char> kept_by_checkpoint(g_.tensors().size(), 0);
  for (const Item& item : items)
    if (item.kind != Item::Kind::op)
      for (TensorId t : item.external_inputs) kept_by_checkpoint[static_cast<std::size_t>(t)] = 1;
  for (OpId id : stacked_ops_) {
    const Op& op = g_.op(id);
    if (op.kind != OpKind::layer_norm || !loop_invariant_[static_cast<std::size_t>(id)] ||
        !kept_by_checkpoint[static_cast<std::size_t>(op.outputs.front())])
      continue;
    const Tensor& in = tensor(op.inputs.front());
    if (in.rows / g_.run().batch % 8 != 0) continue;
    const std::int64_t bytes = profile_.rule(op.kind).linearization.float32_input_copies * in.rows * in.cols * 4;
    if (bytes > 0) hold_stacked(bytes, op.outputs.front());
  }
}

// A buffer held with the stacks until release_stacked_residuals(), named
// after the tensor whose op made it (for diagnostics).
void MemoryMachine::hold_stacked(std::int64_t bytes, TensorId named_after) {
  const int b = allocate(bytes, kActivations, 1);
  buffer(b).tensor = named_after;
  buffer(b).stacked = true;
  stacked_.push_back(b);
}

void MemoryMachine::release_stacked_residuals() {
  for (int b : stacked_) release(b);
  stacked_.clear();
  stacked_ops_.clear();
}

// One op's residuals, one buffer; nothing for a loop-invariant op after the
// first step (the hoisted residuals are the first step's). An activation
// two ops keep is stacked once, and a step's grid input that the step holds
// anyway (J19, static_breakdown()) is not stacked again. Not a
// compiler-recomputable buffer: XLA's rematerialisation does not reach into
// a loop's stacked outputs.
void MemoryMachine::stack_residuals(OpId id) {
  if (hoisted(id, Pass::forward)) return;
  const Op& op = g_.op(id);
  const OpMemoryRule::LinearizationResiduals& r = profile_.rule(op.kind).linearization;
  const std::int64_t value_bytes = element_bytes(g_.run().dtype);
  auto values = [](const Tensor& t) { return t.rows * t.cols; };
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorId t = op.inputs[i];
    if (!(r.inputs & (1u << i)) || tensor(t).role != TensorRole::activation) continue;
    if (tensor_stacked_[static_cast<std::size_t>(t)]) continue;
    if (profile_.grid_input_held_through_step && assembles_grid_input(g_, g_.op(g_.producer(t)))) continue;
    tensor_stacked_[static_cast<std::size_t>(t)] = 1;
    // J53: a linear's input, which only its matmuls read, in the dtype they
    // read it in.
    const bool narrowed = op.kind == OpKind::linear && profile_.scan_stacks_linear_inputs_in_bfloat16 &&
                          !loop_invariant_[static_cast<std::size_t>(id)];
    bytes += values(tensor(t)) * (narrowed ? element_bytes(DType::bfloat16) : value_bytes);
  }
  if (r.output_copies > 0) bytes += r.output_copies * values(tensor(op.outputs.front())) * value_bytes;
  if (r.float32_input_copies > 0 || r.float32_per_row > 0) {
    const Tensor& in = tensor(op.inputs.front());
    bytes += r.float32_input_copies * values(in) * 4 + r.float32_per_row * in.rows * 4;
  }
  if (bytes == 0) return;
  hold_stacked(bytes, op.outputs.front());
  stacked_ops_.push_back(id);
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

// ---- backward -----------------------------------------------------------------

// In a rollout that stacks residuals (J11), the step's backward ends where
// the items of the step before begin: the output gradients its linears
// outside every checkpoint held for their weight gradients are let go.
void MemoryMachine::backward(const std::vector<Item>& items, std::int64_t block_rows, int block) {
  const bool top_level = stacking_residuals_ && region_depth_ == 0 && block_rows == 0;
  // Outside every checkpoint and every scanned loop, the decoder's edge
  // embedding's backward waits (J32).
  const bool deferring = profile_.decoder_edge_embedding_backward_deferred && region_depth_ == 0 && block_rows == 0 &&
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
  if (deferring && run_deferred_at_end_) run_deferred();
}

// J54: the gradient of a hoisted op's output is off XLA's chain of input
// gradients (only the op's parameter gradients read it): the post-order
// reaches it after the chain, so its bytes count at the step's end.
bool MemoryMachine::off_chain_gradient(Category category, TensorId t) const {
  if (!stacking_residuals_ || category != kGradients || t < 0) return false;
  const OpId producer = g_.producer(t);
  return producer >= 0 && loop_invariant_[static_cast<std::size_t>(producer)];
}

// The backward of step `ended_step` (-1: none) is over, that of the next
// may begin: what it allocated is measured (J54).
void MemoryMachine::begin_step_backward(int ended_step) {
  allocated_bytes_ += off_chain_bytes_;
  off_chain_bytes_ = 0;
  if (ended_step >= 0) {
    const auto s = static_cast<std::size_t>(ended_step);
    if (step_backward_bytes_.size() <= s) step_backward_bytes_.resize(s + 1, 0);
    step_backward_bytes_[s] = allocated_bytes_ - step_backward_from_;
  }
  step_backward_from_ = allocated_bytes_;
}

// What linear `op`'s weight gradient reads besides its output gradient:
// the input it saved, or, where it saved none (linear_input_recomputed()),
// what the input's producer kept to make it again (the live buffers of the
// producer's inputs).
std::vector<int> MemoryMachine::weight_gradient_inputs(const Op& op, const std::vector<int>& saved) const {
  std::vector<int> inputs = saved;
  if (inputs.empty())
    for (TensorId t : op.inputs)
      if (const OpId p = g_.producer(t); tensor(t).role == TensorRole::activation && p >= 0)
        for (TensorId u : g_.op(p).inputs)
          if (const int b = current(u);
              tensor(u).role == TensorRole::activation && b >= 0 && buffer(b).tensor == u && buffer(b).refs > 0)
            inputs.push_back(b);
  std::sort(inputs.begin(), inputs.end());
  inputs.erase(std::unique(inputs.begin(), inputs.end()), inputs.end());
  return inputs;
}

// J54: XLA's depth-first scheduler (DFSMemoryScheduler) visits the loop
// body's root operands, the parameter gradients among them, in decreasing
// order of their subtrees' bytes, where each instruction's is capped at
// the bytes of the body's post-order up to it. The post-order follows the
// chain of input gradients from the loss, so an operand's capped bytes
// are about the bytes the step's backward allocated up to it (its
// defined_at, from the step's start), and a weight gradient's are theirs
// summed, capped at about all the step's backward allocates (as a run
// before measured it, assume_step_backward_bytes()). Those whose sum
// reaches the cap are visited first, each as the chain reaches it; the
// others after the chain, their operands held until then.
bool MemoryMachine::weight_gradient_waits(const Op& op, const std::vector<int>& inputs) const {
  std::vector<int> operands = inputs;
  for (TensorId t : op.outputs)
    if (grad(t) >= 0 && std::find(operands.begin(), operands.end(), grad(t)) == operands.end())
      operands.push_back(grad(t));
  // What the checkpoint's recomputation reads from before it passes an
  // optimisation barrier with the gradient entering it (jax.checkpoint's
  // guard against common subexpressions): as deep as the barrier.
  const std::int64_t barrier = region_backward_from_.back();
  std::int64_t depth = 0;
  for (int b : operands) depth += std::max(buffer(b).defined_at, barrier) - step_backward_from_;
  return depth < assumed_step_backward_bytes_[static_cast<std::size_t>(op.step)];
}

std::vector<std::vector<int>> MemoryMachine::slice_kept_inputs(const std::vector<Item>& items, int step) {
  std::vector<std::vector<int>> slices;
  if (!profile_.loop_body_slices_kept_inputs) return slices;
  slices.resize(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Item& region = items[i];
    if (region.kind != Item::Kind::region || g_.op(first_op(region)).step != step) continue;
    for (TensorId t : region.external_inputs) {
      const OpId producer = g_.producer(t);
      if (tensor(t).role != TensorRole::activation || current(t) < 0 ||
          (producer >= 0 && loop_invariant_[static_cast<std::size_t>(producer)]))
        continue;
      slices[i].push_back(allocate(buffer(current(t)).bytes, kActivations, 1, t));
    }
  }
  return slices;
}

MemoryMachine::TopLevelBranch MemoryMachine::take_top_level_branch(const std::vector<Item>& items) {
  int decoder = -1;
  for (std::size_t s = 0; s < g_.chain().size(); ++s)
    if (g_.chain()[s].role == StageRole::decoder) decoder = static_cast<int>(s);
  if (decoder < 0) return {};
  const auto before_decoder = [&](OpId id) { return g_.op(id).stage < decoder; };
  const std::vector<EarlyRole> roles = early_roles(items, before_decoder);
  TopLevelBranch branch;
  branch.in_branch.assign(items.size(), 0);
  branch.before = items.size();
  std::size_t plain = 0;  // the plain items, each of which saved once, in order
  bool any = false;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind != Item::Kind::op) continue;
    ++plain;
    branch.in_branch[i] = roles[i] == kEarlyBranch && before_decoder(items[i].op) ? 1 : 0;
    any = any || branch.in_branch[i];
  }
  if (!any) return {};
  for (std::size_t i = 0; i < items.size() && branch.before == items.size(); ++i)
    for (OpId id : ops_of(items[i]))
      if (!before_decoder(id)) branch.before = i;
  if (plain > saved_.size()) throw std::logic_error("MemoryMachine: a plain op's saved tensors are missing");
  std::size_t j = saved_.size();
  for (std::size_t i = items.size(); i-- > 0;) {
    if (items[i].kind != Item::Kind::op) continue;
    --j;
    if (!branch.in_branch[i]) continue;
    branch.ops.emplace_back(items[i].op, std::move(saved_[j]));
    saved_.erase(saved_.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return branch;
}

void MemoryMachine::run_top_level_branch(TopLevelBranch& branch) {
  for (auto& [op, saved] : branch.ops) backward_op(op, std::move(saved), 0, -1);
  branch.ops.clear();
  on_top_level_branch_done();
}

void MemoryMachine::run_deferred() {
  std::vector<Deferred> deferred = std::move(deferred_);
  deferred_.clear();
  for (Deferred& d : deferred) backward_op(d.op, std::move(d.saved), 0, -1);
}

// An op of the decoder (J32's) outside its edge update that reads, of the
// activations, only what other such ops make: the edge embedding, whose
// input is a constant.
bool MemoryMachine::off_chain(OpId id) const {
  const Op& op = g_.op(id);
  if (op.edge_update || op.stage >= static_cast<int>(g_.chain().size()) ||
      g_.chain()[static_cast<std::size_t>(op.stage)].role != StageRole::decoder)
    return false;
  for (TensorId t : op.inputs) {
    if (tensor(t).role != TensorRole::activation) continue;
    const OpId p = g_.producer(t);
    if (p < 0 || !off_chain(p)) return false;
  }
  return true;
}

// Those of them whose outputs only other such ops read: all but the one
// whose output the edge update reads (its LayerNorm, whose backward frees
// the gradient the edge update handed it and so runs at once).
bool MemoryMachine::deferrable(OpId id) const {
  if (!off_chain(id)) return false;
  for (TensorId t : g_.op(id).outputs)
    for (OpId c : g_.consumers(t))
      if (!off_chain(c)) return false;
  return true;
}

// What XLA writes for `op`: its materialised outputs and, after a first
// linear whose fusion writes SiLU's output too (J2), that output.
std::int64_t MemoryMachine::bytes_written(const Op& op, const OpMemoryRule& rule, std::int64_t block_rows) const {
  std::int64_t bytes = 0;
  for (TensorId t : op.outputs) {
    if (rule.output_materialized) bytes += output_bytes(op, rule, t, block_rows);
    for (OpId c : g_.consumers(t)) {
      const Op& consumer = g_.op(c);
      const OpMemoryRule& consumer_rule = profile_.rule(consumer.kind);
      if (consumer.kind == OpKind::silu && consumer_rule.output_materialized)
        bytes += output_bytes(consumer, consumer_rule, consumer.outputs.front(), block_rows);
    }
  }
  return bytes;
}

// Before an op of a region's recomputation: the deferred ops run if it
// writes more than the gradient into the embedding's hidden layer (XLA's
// list scheduler runs the ready op that frees the most bytes less those it
// makes, and theirs frees nothing while making that gradient, J32).
void MemoryMachine::deferred_set_off(const Op& op, const OpMemoryRule& rule, std::int64_t block_rows) {
  if (deferred_.empty() && !(deferred_pending_elsewhere_ && !ran_deferred_elsewhere_)) return;
  const std::int64_t threshold = deferred_.empty() ? deferred_elsewhere_.threshold : deferred_threshold_;
  if (bytes_written(op, rule, block_rows) <= threshold) return;
  if (!deferred_.empty()) {
    run_deferred();
    return;
  }
  live_[kWorkspace] += deferred_elsewhere_.peak;
  sample_transient();
  live_[kWorkspace] += deferred_elsewhere_.delta - deferred_elsewhere_.peak;
  ran_deferred_elsewhere_ = true;
}

OpId MemoryMachine::first_op(const Item& item) {
  if (item.kind == Item::Kind::op) return item.op;
  return item.kind == Item::Kind::blocks ? item.first_op : first_op(item.children.front());
}

void MemoryMachine::release_weight_gradient_operands() {
  for (int b : held_weight_gradient_operands_) release(b);
  held_weight_gradient_operands_.clear();
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

// A top-level region's recomputation (in the context begun for it) and
// backward (in `outer_context`, as every region's) in XLA's order (J33):
// for each stage with a complete branch, in chain order, its branch and
// the branch's ancestors recomputed, then the branch differentiated; then
// the rest recomputed and the rest differentiated, in reverse.
void MemoryMachine::recompute_and_backward(const Item& region, std::int64_t block_rows, int block, int outer_context) {
  const auto& children = region.children;
  std::vector<OpId> ops = ops_of(children);
  std::sort(ops.begin(), ops.end());
  const std::vector<EarlyRole> roles =
      early_roles(children, [&](OpId id) { return std::binary_search(ops.begin(), ops.end(), id); });
  std::vector<int> early_stages;
  for (std::size_t i = 0; i < children.size(); ++i)
    if (roles[i] == kEarlyBranch) {
      const int stage = g_.op(children[i].op).stage;
      if (std::find(early_stages.begin(), early_stages.end(), stage) == early_stages.end())
        early_stages.push_back(stage);
    }
  const int region_context = context_;
  // This region's checkpoint entry: those of the regions right of it are gone.
  const auto kept_entry = static_cast<std::ptrdiff_t>(kept_inputs_.size()) - 1;
  LastReaders readers = last_readers(children, region.external_inputs);
  const auto run = [&](const std::vector<Item>& recomputed, const std::vector<Item>& differentiated) {
    context_ = region_context;
    ++recompute_depth_;
    recompute_items(recomputed, block_rows, block, readers, kept_entry);
    --recompute_depth_;
    context_ = outer_context;
    ++region_depth_;
    backward(differentiated, block_rows, block);
    --region_depth_;
  };
  if (early_stages.empty()) {
    run(children, children);
    return;
  }
  for (int stage : early_stages) {
    std::vector<Item> recomputed, differentiated;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (roles[i] == kLate || g_.op(children[i].op).stage != stage) continue;
      recomputed.push_back(children[i]);
      if (roles[i] == kEarlyBranch) differentiated.push_back(children[i]);
    }
    run(recomputed, differentiated);
  }
  std::vector<Item> recomputed, differentiated;
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (roles[i] == kLate) recomputed.push_back(children[i]);
    if (roles[i] != kEarlyBranch) differentiated.push_back(children[i]);
  }
  run(recomputed, differentiated);
}

// A stage's complete branch in a region: its plain ops whose outputs only
// ops after the region or other such ops of the stage read (their
// gradients are complete when the region's backward starts), provided
// that the activations the branch reads or lets go (Op::releases_held),
// and its ancestors do, are made by plain ops of the same stage in the
// region that no other stage of the region reads (recomputing and
// differentiating it then need nothing of another stage, and give it
// nothing).
std::vector<MemoryMachine::EarlyRole> MemoryMachine::early_roles(const std::vector<Item>& children,
                                                                 const std::function<bool(OpId)>& in_region) const {
  std::vector<EarlyRole> roles(children.size(), kLate);
  // Plain children by op, and the branch, found from the last child back.
  std::vector<std::pair<OpId, std::size_t>> plain;
  for (std::size_t i = 0; i < children.size(); ++i)
    if (children[i].kind == Item::Kind::op) plain.emplace_back(children[i].op, i);
  std::sort(plain.begin(), plain.end());
  const auto child_of = [&](OpId id) -> std::ptrdiff_t {
    const auto it = std::lower_bound(plain.begin(), plain.end(), std::make_pair(id, std::size_t{0}));
    return it != plain.end() && it->first == id ? static_cast<std::ptrdiff_t>(it->second) : -1;
  };
  for (std::size_t i = children.size(); i-- > 0;) {
    if (children[i].kind != Item::Kind::op) continue;
    bool read = false, complete = true;
    for (TensorId t : g_.op(children[i].op).outputs)
      for (OpId c : g_.consumers(t)) {
        read = true;
        if (!in_region(c)) continue;
        const std::ptrdiff_t k = child_of(c);
        complete = complete && k >= 0 && roles[static_cast<std::size_t>(k)] == kEarlyBranch &&
                   g_.op(c).stage == g_.op(children[i].op).stage;
      }
    if (read && complete) roles[i] = kEarlyBranch;
  }
  // Each stage's branch with its ancestors, or none of it.
  std::vector<int> stages;
  for (std::size_t i = 0; i < children.size(); ++i)
    if (roles[i] == kEarlyBranch) stages.push_back(g_.op(children[i].op).stage);
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  for (int stage : stages) {
    std::vector<EarlyRole> with = roles;
    bool valid = true;
    for (std::size_t i = children.size(); i-- > 0 && valid;) {
      if (with[i] == kLate || g_.op(children[i].op).stage != stage) continue;
      const Op& op = g_.op(children[i].op);
      std::vector<TensorId> reads = op.inputs;  // and the holds it lets go (made in its stage)
      reads.insert(reads.end(), op.releases_held.begin(), op.releases_held.end());
      for (TensorId t : reads) {
        const OpId p = g_.producer(t);
        if (p < 0) continue;
        const std::ptrdiff_t k = in_region(p) ? child_of(p) : -1;
        if (k < 0 || g_.op(p).stage != stage) {
          valid = false;
          break;
        }
        if (with[static_cast<std::size_t>(k)] != kLate) continue;
        with[static_cast<std::size_t>(k)] = kEarlyAncestor;
        // What another stage of the region reads of it must wait for
        // that stage's backward: not a branch that runs first.
        for (TensorId u : g_.op(p).outputs)
          for (OpId c : g_.consumers(u)) valid = valid && (!in_region(c) || g_.op(c).stage == stage);
      }
    }
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].kind != Item::Kind::op || g_.op(children[i].op).stage != stage) continue;
      roles[i] = valid ? with[i] : kLate;
    }
  }
  return roles;
}

// What XLA's backward loop body holds through a step's backward besides the
// ops' residuals (J14): the step's grid input, the concatenation that reads
// the carried frames, materialised in the activation dtype; a float32
// copy of one of the two carried frames' cotangent; and the prediction's
// float32 cotangent, which the residual on the last frame adds to the
// carry's (J9). A body whose carried frames come from host memory holds
// no grid input: it holds those frames in the activation dtype (J48).
std::vector<int> MemoryMachine::hold_loop_body_step_inputs(const Item& step) {
  const std::vector<OpId> ops = ops_of(step.children);
  TensorId carry = -1, next = -1, prediction = -1;
  for (OpId id : ops)
    if (const Op& op = g_.op(id); op.kind == OpKind::next_input && op.inputs.size() > 1) {
      prediction = op.inputs[0];
      carry = op.inputs[1];
      next = op.outputs.front();
    }
  std::vector<int> held;
  if (carry < 0) return held;
  held.push_back(allocate(tensor(next).gradient_bytes() / 2, kGradients, 1, next));
  held.push_back(allocate(tensor(prediction).rows * tensor(prediction).cols * 4, kGradients, 1, prediction));
  if (in_offloaded_body() && profile_.offloaded_inputs_fetched_in_activation_dtype) return held;
  for (OpId id : ops)
    if (const Op& op = g_.op(id);
        op.kind == OpKind::concat && std::find(op.inputs.begin(), op.inputs.end(), carry) != op.inputs.end())
      held.push_back(allocate(tensor(op.outputs.front()).bytes(), kActivations, 1, op.outputs.front()));
  return held;
}

void MemoryMachine::slice_step_target(const std::vector<OpId>& step_ops) {
  if (!profile_.loop_body_slices_step_target) return;
  for (OpId id : step_ops)
    if (const TensorId target = step_target(g_, g_.op(id)); target >= 0)
      target_slice_ = allocate(scanned_target_bytes(g_, target), kActivations, 1, target);
}

bool MemoryMachine::writes_prediction(OpId op) const {
  for (OpId reader : g_.consumers(g_.op(op).outputs.front()))
    if (g_.op(reader).kind == OpKind::mse_loss) return true;
  return false;
}

// A linear does not keep an input that XLA recomputes for its weight
// gradient from what the input's producer keeps: a LayerNorm's output,
// from the LayerNorm's input and statistics (J41); a SiLU's output, from
// h, in its loop body (J10, J14; at batch 1 only in the step's own
// recomputation, J29; not the output MLP's, J43), everywhere under float32
// (J13), and in the forward pass of an MLP whose output an edge update
// reads (J27).
bool MemoryMachine::linear_input_recomputed(OpId reader, TensorId input, Pass pass) const {
  if (g_.op(reader).kind != OpKind::linear) return false;
  const OpId p = g_.producer(input);
  if (p >= 0 && g_.op(p).kind == OpKind::layer_norm) return profile_.linears_recompute_norm_input;
  if (p < 0 || g_.op(p).kind != OpKind::silu) return false;
  if (profile_.linears_recompute_silu_input) return true;
  if (in_loop_body_ && profile_.loop_body_recomputes_silu &&
      (!profile_.loop_body_inner_checkpoints_keep_silu || recomputing_step_))
    return !(profile_.loop_body_output_mlp_keeps_silu && writes_prediction(reader));
  return pass == Pass::forward && profile_.edge_update_inputs_recompute_silu && read_by_edge_update(reader);
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

bool aligned_mesh_edge_norm(const CostGraph& graph, const MemoryProfile& profile, OpId op) {
  const Op& o = graph.op(op);
  if (!profile.aligned_mesh_edge_norms_copy_input || o.kind != OpKind::layer_norm) return false;
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

int kept_input_reader_stage(const CostGraph& graph, const MemoryProfile& profile, TensorId t) {
  if (!profile.kept_inputs_freed_at_last_reader || graph.tensor(t).role != TensorRole::activation) return -1;
  const OpId producer = graph.producer(t);
  if (producer < 0) return -1;
  const Op& made_by = graph.op(producer);
  const OpMemoryRule& rule = profile.rule(made_by.kind);
  for (std::size_t i = 0; i < made_by.outputs.size(); ++i)
    if (made_by.outputs[i] == t && (rule.saved_outputs & (1u << i))) return -1;
  int stage = -1, step = -1;
  for (OpId c : graph.consumers(t)) {
    const Op& reader = graph.op(c);
    if (stage >= 0 && (reader.stage != stage || reader.step != step)) return -1;
    stage = reader.stage;
    step = reader.step;
  }
  return stage;
}

std::vector<int> blocked_edge_readers(const CostGraph& graph, const MemoryProfile& profile) {
  if (!profile.blocked_edge_updates_drop_norm_copies || !profile.aligned_mesh_edge_norms_copy_input) return {};
  std::vector<std::vector<int>> reaches;
  std::vector<int> readers;
  for (std::size_t i = 0; i < graph.ops().size(); ++i) {
    if (!aligned_mesh_edge_norm(graph, profile, static_cast<OpId>(i))) continue;
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
  if (!aligned_mesh_edge_norm(g_, profile_, id)) return NormCopy::none;
  const Op& op = g_.op(id);
  if (current_[static_cast<std::size_t>(op.inputs[0])] < 0 || norm_copy_dropped(id)) return NormCopy::none;
  if (read_by_edge_update(id)) return NormCopy::kept;
  const bool dies = pass == Pass::forward || (profile_.unread_norm_copy_dies_at_norm && !stacking_residuals_);
  return dies ? NormCopy::transient : NormCopy::kept;
}

bool MemoryMachine::norm_copy_dropped(OpId op) const {
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

void MemoryMachine::backward_blocks(const Item& item) {
  // Under XLA the blocks' instructions interleave (J17): their peak is
  // sampled from XLA's order; running them one after another below then
  // only leaves behind what they leave.
  const bool sampled = profile_.blocks_backward_list_scheduled && !quiet_ && sample_xla_blocked_backward(item);
  if (sampled) ++quiet_;
  backward_blocks_in_turn(item);
  if (sampled) --quiet_;
}

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
  // A fused input was never materialised. A fused concat's gradient is one
  // buffer of its size, and its parts' gradients are slices of it, read
  // where they are consumed; through any other fused producer the kernel
  // hands gradients to the producer's inputs directly.
  if (made_fused(t)) {
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
      contributions_.push_back({u, whole, block_rows > 0 && !block_internal_[static_cast<std::size_t>(u)],
                                gradient_bytes_of(u, block_rows)});
    }
    release(whole);
    return 0;
  }
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

// True when t's producer is fused into its consumer (no buffer of its own).
bool MemoryMachine::made_fused(TensorId t) const {
  const OpId p = g_.producer(t);
  return p >= 0 && !profile_.rule(g_.op(p).kind).output_materialized;
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

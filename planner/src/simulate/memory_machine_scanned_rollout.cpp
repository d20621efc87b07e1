// The scanned rollout (memory_machine.h): what XLA's loops over rollout steps
// hold besides the ops' own buffers: the residuals a loop without step
// checkpoints stacks (J11), the loop body's copies and slices (J14, J25,
// J44, J45), step inputs offloaded to host memory (J47, J48), and the
// measure of each step's backward that orders its weight gradients (J54).

#include "simulate/memory_machine.h"

#include <algorithm>
#include <cstddef>

#include "simulate/step_costs.h"

namespace actmem::detail {

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
    if (profile_.step_input_held_through_step && assembles_step_input(g_, g_.op(g_.producer(t)))) continue;
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

void MemoryMachine::release_weight_gradient_operands() {
  for (int b : held_weight_gradient_operands_) release(b);
  held_weight_gradient_operands_.clear();
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

}  // namespace actmem::detail

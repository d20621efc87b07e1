// Retention (memory_machine.h): what an op keeps for its backward (its rule's
// saved inputs and outputs, less what the compiler recomputes instead),
// what a weight gradient reads and when it runs, and how long a checkpoint
// holds what it keeps.

#include "simulate/memory_machine.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <utility>

namespace actmem::detail {

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

// ---- the save policies, in the order they decide ----

// The residuals of the op's derivative (its rule's saved inputs and
// outputs: a linear its input, SiLU its input, LayerNorm its input and
// statistics, a product both operands, softmax its output, ...).
void MemoryMachine::derivative_residuals(const SaveQuery& q, SaveDecision& d) const {
  const OpMemoryRule& rule = profile_.rule(g_.op(q.op).kind);
  d.inputs = rule.saved_inputs;
  d.outputs = rule.saved_outputs;
}

// Less the inputs a linear's weight gradient recomputes from what their
// producer keeps (linear_input_recomputed(): J10, J13, J27, J29, J41, J43).
void MemoryMachine::weight_gradient_recomputes_input(const SaveQuery& q, SaveDecision& d) const {
  const Op& op = g_.op(q.op);
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    if ((d.inputs & (1u << i)) && linear_input_recomputed(q.op, op.inputs[i], q.pass)) d.inputs &= ~(1u << i);
}

// A LayerNorm's layout copy of its input, kept for its backward (J31).
void MemoryMachine::norm_keeps_layout_copy(const SaveQuery& q, SaveDecision& d) const {
  d.layout_copy = q.norm == NormCopy::kept;
}

// In the forward loop of a rollout without step checkpoints, the
// residuals JAX's linearization names are stacked instead (J11).
void MemoryMachine::scan_stacks_residuals(const SaveQuery& q, SaveDecision& d) const {
  if (!stacking_residuals_ || q.pass != Pass::forward) return;
  d = SaveDecision{};
  d.stacked = true;
}

const std::array<MemoryMachine::SavePolicy, 4> MemoryMachine::kSavePolicies = {{
    {"derivative residuals", &MemoryMachine::derivative_residuals},
    {"inputs a weight gradient recomputes", &MemoryMachine::weight_gradient_recomputes_input},
    {"a LayerNorm's layout copy", &MemoryMachine::norm_keeps_layout_copy},
    {"residuals a scanned loop stacks", &MemoryMachine::scan_stacks_residuals},
}};

// What op `id` keeps for its backward, one entry of saved_ (empty where
// its residuals are stacked), as the save policies decide in turn.
void MemoryMachine::save_for_backward(OpId id, Pass pass, NormCopy norm) {
  const SaveQuery query{id, pass, norm};
  SaveDecision decision;
  for (const SavePolicy& policy : kSavePolicies) (this->*policy.decide)(query, decision);
  std::vector<int> saved;
  if (decision.stacked) {
    stack_residuals(id);
  } else {
    const Op& op = g_.op(id);
    for (std::size_t i = 0; i < op.inputs.size(); ++i)
      if (decision.inputs & (1u << i)) save(op.inputs[i], saved);
    if (decision.layout_copy)
      saved.push_back(allocate(buffer(current(op.inputs[0])).bytes, kActivations, 1, op.inputs[0]));
    for (std::size_t i = 0; i < op.outputs.size(); ++i)
      if (decision.outputs & (1u << i)) save(op.outputs[i], saved);
  }
  saved_.push_back(std::move(saved));
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

}  // namespace actmem::detail

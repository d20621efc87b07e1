#include "cost/memory_profile.h"

namespace actmem {
namespace {

constexpr std::uint32_t bit(int i) { return std::uint32_t{1} << i; }

OpMemoryRule& rule(MemoryProfile& p, OpKind kind) { return p.rules[static_cast<int>(kind)]; }

// Rules common to both frameworks: the residuals of each op's derivative.
void common_rules(MemoryProfile& p) {
  rule(p, OpKind::linear).saved_inputs = bit(0);      // x (the weight is a parameter)
  rule(p, OpKind::silu).saved_inputs = bit(0);        // x
  rule(p, OpKind::layer_norm).saved_inputs = bit(0);  // x, and mean/rstd
  rule(p, OpKind::layer_norm).saved_outputs = bit(1);
  rule(p, OpKind::layer_norm).grads_are_slices = true;
  rule(p, OpKind::concat).grads_alias_output = true;  // backward: slices of the gradient
  rule(p, OpKind::concat).grads_are_slices = true;
  rule(p, OpKind::add).grads_alias_output = true;         // backward: the gradient passes through
  rule(p, OpKind::mse_loss).saved_inputs = bit(0);        // prediction (the target is an input)
  rule(p, OpKind::next_input).grads_alias_output = true;  // a concat
  rule(p, OpKind::next_input).grads_are_slices = true;
  rule(p, OpKind::matmul).saved_inputs = bit(0) | bit(1);  // each operand's gradient reads the other
  rule(p, OpKind::softmax).saved_outputs = bit(0);         // y: dx = y ⊙ (dy − Σ y·dy)
  // gather and scatter_add keep only their index (an input); a cast keeps
  // nothing, and its backward casts the gradient back (a fresh buffer).
}

}  // namespace

MemoryProfile memory_profile(const RunOptions& run, Implementation implementation) {
  MemoryProfile p;
  p.framework = run.framework;
  common_rules(p);
  apply_memory_rules(p, run, implementation);
  return p;
}

bool scans_checkpointed_steps(const CostGraph& graph) {
  return memory_profile(graph.run(), graph.model().implementation).step_checkpoint_scanned;
}

bool read_saves(const CostGraph& graph, const MemoryProfile& profile, OpId reader, TensorId t) {
  const Op& op = graph.op(reader);
  const OpMemoryRule& rule = profile.rule(op.kind);
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] == t && (rule.saved_inputs & (1u << i))) return true;
  if (rule.output_materialized) return false;
  for (OpId d : graph.consumers(op.outputs.front()))
    if (read_saves(graph, profile, d, op.outputs.front())) return true;
  return false;
}

}  // namespace actmem

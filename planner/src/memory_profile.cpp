#include "actmem/memory_profile.h"

namespace actmem {
namespace {

constexpr std::uint32_t bit(int i) { return std::uint32_t{1} << i; }

void set(MemoryProfile& p, OpKind kind, OpMemoryRule rule) { p.rules[static_cast<int>(kind)] = rule; }

}  // namespace

MemoryProfile memory_profile(Framework framework, DType dtype) {
  MemoryProfile p;
  p.framework = framework;
  // Rules common to both frameworks (measured for PyTorch 1.13 with
  // saved_tensors_hooks, integrations/pytorch/measure_saved.py; the JAX
  // residuals follow from its differentiation rules and are documented as
  // assumptions in docs/cost-model.md).
  set(p, OpKind::linear, {bit(0), 0, false, true});           // x (weight is a parameter)
  set(p, OpKind::silu, {bit(0), 0, false, true});             // x
  set(p, OpKind::layer_norm, {bit(0), bit(1), false, true});  // x, and mean/rstd
  set(p, OpKind::gather, {0, 0, false, true});                // only the index (an input)
  set(p, OpKind::concat, {0, 0, true, true});                 // backward: views of the gradient
  set(p, OpKind::zeros, {0, 0, false, true});
  set(p, OpKind::scatter_add, {0, 0, false, true});           // only the index
  set(p, OpKind::add, {0, 0, true, true});                    // backward: the gradient passes through
  set(p, OpKind::mse_loss, {bit(0), 0, false, true});         // prediction (target is an input)
  set(p, OpKind::next_input, {0, 0, true, true});             // a concat
  if (framework == Framework::jax) {
    // XLA fuses the gathers into the concat that consumes them and scatters
    // into the accumulator in place: neither gets a buffer of its own.
    set(p, OpKind::gather, {0, 0, false, false});
    set(p, OpKind::zeros, {0, 0, false, false});
    p.accumulate_needs_unique_owner = false;
    p.hold_recomputed_until_region_end = false;
    p.nested_checkpoints_keep_inputs = false;
    p.parameter_cast_bytes = dtype == DType::float32 ? 0 : element_bytes(dtype);
  }
  return p;
}

}  // namespace actmem

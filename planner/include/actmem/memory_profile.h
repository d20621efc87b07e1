#pragma once
// What a framework keeps for the backward pass, op by op, and how its
// backward pass allocates gradients (docs/cost-model.md has the tables and
// how each rule was established).

#include <cstdint>

#include "actmem/cost_graph.h"
#include "actmem/run_options.h"

namespace actmem {

struct OpMemoryRule {
  std::uint32_t saved_inputs = 0;   // bit i: input i is kept for the backward pass
  std::uint32_t saved_outputs = 0;  // bit i: output i is kept for the backward pass
  // true: the gradients of the inputs are the output's gradient itself or
  // views of it (add passes it through, concat splits it); false: backward
  // allocates a fresh gradient of each input's full size.
  bool grads_alias_output = false;
  // false: the output is fused into its consumer and never gets a buffer.
  bool output_materialized = true;
};

struct MemoryProfile {
  Framework framework = Framework::pytorch;
  OpMemoryRule rules[10];  // indexed by OpKind
  // How a gradient contribution meets an existing gradient buffer:
  // true (PyTorch's InputBuffer): in place when either side is uniquely
  // owned, otherwise a fresh sum; false (XLA): always in place.
  bool accumulate_needs_unique_owner = true;
  // true (torch.utils.checkpoint, non-reentrant, torch 1.13): tensors saved
  // during a region's recomputation stay until the region's backward is done;
  // false (jax.checkpoint): each is freed after the backward op that uses it.
  bool hold_recomputed_until_region_end = true;
  // Which execution of a checkpoint keeps its inputs until its backward.
  // true (PyTorch non-reentrant: its closure): every execution in the
  // original forward pass, nested in another region or not, and none in a
  // recomputation. false (JAX): the execution at the saving level, i.e. the
  // original forward for top-level regions, the parent's recomputation for
  // nested ones.
  bool nested_checkpoints_keep_inputs = true;
  // Bytes of parameter copies in the activation dtype held for the whole
  // step, per parameter (JAX casts the float32 masters to bfloat16 once).
  std::int64_t parameter_cast_bytes = 0;

  const OpMemoryRule& rule(OpKind kind) const { return rules[static_cast<int>(kind)]; }
};

// The profile of a framework for activations of the given dtype.
MemoryProfile memory_profile(Framework framework, DType dtype);

}  // namespace actmem

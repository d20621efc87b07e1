#pragma once
// The cost rules of a training step that the simulator (simulator.cpp) and
// the solver's chain model (solver_model.cpp) share, written once
// (docs/cost-model.md sections 2, "Memory", and 3, "Time"): what the step holds
// whatever the plan, the FLOP rate it runs at, and an op's roofline time.

#include <algorithm>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/report.h"
#include "cost/memory_profile.h"

namespace actmem::detail {

// Whether `op` assembles a step's grid input before the network: a
// concatenation of a model input with other parts.
inline bool assembles_step_input(const CostGraph& graph, const Op& op) {
  return op.kind == OpKind::concat && std::any_of(op.inputs.begin(), op.inputs.end(), [&](TensorId t) {
           return graph.tensor(t).role == TensorRole::input;
         });
}

// Bytes of the grid inputs the framework assembles before the network and
// holds through the step (MemoryProfile::step_input_held_through_step),
// in the activation dtype. None in a scanned rollout, whose loop body
// holds its own step's instead (J14).
inline std::int64_t held_step_input_bytes(const CostGraph& graph, const MemoryProfile& profile, bool scanned) {
  if (!profile.step_input_held_through_step || scanned) return 0;
  std::int64_t bytes = 0;
  for (const Op& op : graph.ops())
    if (assembles_step_input(graph, op)) bytes += graph.tensor(op.outputs.front()).bytes();
  return bytes;
}

// Held through the whole step whatever the plan: float32 parameters, Adam's
// two moments, the inputs, the device's reserve, the parameters' copies in
// the activation dtype (workspace; JAX bfloat16), and as activations the
// grid inputs assembled before the network (J19). Gradients and the other
// activations are the plan's. `scanned`: the rollout runs as XLA's
// scanned loop (every step under its own checkpoint).
inline MemoryBreakdown static_breakdown(const CostGraph& graph, const Device& device, const MemoryProfile& profile,
                                        bool scanned) {
  MemoryBreakdown b;
  b.parameters = graph.parameter_bytes();
  b.optimizer_state = graph.run().optimizer == Optimizer::adam ? 2 * graph.parameter_bytes() : 0;
  b.inputs = graph.input_bytes();
  b.activations = held_step_input_bytes(graph, profile, scanned);
  b.reserved = device.reserve_bytes;
  b.workspace = profile.parameter_cast_bytes * graph.parameter_count();
  return b;
}

// The device's peak rate for the run's dtype: bfloat16 where the device
// states one, float32 otherwise.
inline double flops_per_second(const RunOptions& run, const Device& device) {
  return run.dtype == DType::bfloat16 && device.peak_bf16_flops > 0 ? device.peak_bf16_flops : device.peak_fp32_flops;
}

// Bytes an op reads and writes: its inputs and outputs, once each.
inline double bytes_moved(const CostGraph& graph, const Op& op) {
  double bytes = 0;
  for (TensorId t : op.inputs) bytes += static_cast<double>(graph.tensor(t).bytes());
  for (TensorId t : op.outputs) bytes += static_cast<double>(graph.tensor(t).bytes());
  return bytes;
}

// Roofline time: the op is bound by its FLOPs or by its memory traffic.
inline double roofline_s(double flops, double bytes, double flops_per_s, const Device& device) {
  return std::max(flops / flops_per_s, bytes / device.bandwidth_bytes_per_s);
}

}  // namespace actmem::detail

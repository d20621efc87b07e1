#include "actmem/simulate/accuracy_notes.h"

#include "simulate/xla_module_order.h"

namespace actmem {

namespace {

// Measured on an H200 (docs/validation-jax.md, "On a GPU").
constexpr const char* kJaxOnGpu =
    "actmem's JAX profile is XLA:TPU's; on an H200 it was 1% to 18% under XLA:GPU's figure at rollout 1, and 80% "
    "under at rollout 2 with checkpoints inside the step (docs/validation-jax.md, \"On a GPU\")";

// Measured against XLA:TPU (docs/validation-jax.md; docs/cost-model.md
// J16, J52, J54; integrations/jax/schedules.py): XLA orders these
// modules depth-first where the encoder and decoder are both outside every
// checkpoint (15 cases, actmem −3.7% to +2.1%), in post-order where one is
// (2 cases, −1.8%, −1.9%), by its list scheduler, whose order actmem
// models, where neither is (7 cases, +0.5% to +2.5%); the 104 one-step or
// step-checkpointed cases −2.3% to +3.4%.
std::string unstepped_rollout_note(const CostGraph& g, const Plan& plan) {
  static constexpr const char* kStepped =
      "; with each step checkpointed, as the solver's plans are, -2.3% to +3.4% on the 104 one-step or "
      "step-checkpointed cases; docs/validation-jax.md)";
  switch (detail::xla_module_order(g, plan)) {
    case detail::XlaModuleOrder::depth_first:
      return std::string(
                 "a JAX rollout without step checkpoints, its encoder and decoder outside every checkpoint: XLA "
                 "orders such a program depth-first, computing the loop body's parameter gradients last, as actmem "
                 "models it (actmem was 3.7% under to 2.1% over on the 15 such cases") +
             kStepped;
    case detail::XlaModuleOrder::post_order:
      return std::string(
                 "a JAX rollout without step checkpoints, its encoder or decoder outside every checkpoint: XLA "
                 "orders such a program in post-order (actmem was 1.8% and 1.9% under on the 2 such cases") +
             kStepped;
    case detail::XlaModuleOrder::list: break;
  }
  return std::string(
             "a JAX rollout without step checkpoints: against XLA:TPU actmem was 0.5% to 2.5% over on the 7 "
             "such cases with the encoder and decoder checkpointed (XLA's list order, as actmem models it") +
         kStepped;
}

}  // namespace

std::vector<std::string> accuracy_notes(const CostGraph& g, const Device& d, const Plan& plan) {
  std::vector<std::string> notes;
  if (g.run().framework != Framework::jax) return notes;
  if (!d.id.starts_with("tpu")) notes.emplace_back(kJaxOnGpu);
  if (g.run().rollout >= 2 && !plan.step_checkpoint) notes.push_back(unstepped_rollout_note(g, plan));
  return notes;
}

}  // namespace actmem

#include "actmem/simulate/accuracy_notes.h"

#include <algorithm>
#include <span>

namespace actmem {

namespace {

// Measured on an H200 (docs/validation-jax.md, "On a GPU").
constexpr const char* kJaxOnGpu =
    "actmem's JAX profile is XLA:TPU's; on an H200 it was 1% to 18% under XLA:GPU's figure at rollout 1, and 80% "
    "under at rollout 2 with checkpoints inside the step (docs/validation-jax.md, \"On a GPU\")";

// How many of the grid-sized roles (encoder, decoder) have a stage outside
// every checkpoint of `plan`: 0, 1 or 2.
int grid_roles_outside_checkpoints(const CostGraph& g, const Plan& plan) {
  const std::span<const Stage> chain = g.chain();
  int outside = 0;
  for (StageRole role : {StageRole::encoder, StageRole::decoder}) {
    for (int s = 0; s < static_cast<int>(chain.size()); ++s) {
      if (chain[static_cast<std::size_t>(s)].role != role) continue;
      const bool covered = std::any_of(plan.checkpoints.begin(), plan.checkpoints.end(),
                                       [&](const Region& r) { return r.from <= s && s <= r.to; });
      if (!covered) {
        ++outside;
        break;
      }
    }
  }
  return outside;
}

// Measured against XLA:TPU (docs/validation-jax.md; docs/cost-model.md
// section 4, integrations/jax/schedules.py): XLA orders these modules
// depth-first where the encoder and decoder are both outside every
// checkpoint (6 cases, actmem −2.1% to −13.2%), in post-order where one is
// (2 cases, −1.8%, −1.9%), by its list scheduler, whose order actmem
// models, where neither is (7 cases, +0.5% to +2.5%).
std::string unstepped_rollout_note(const CostGraph& g, const Plan& plan) {
  static constexpr const char* kStepped =
      "; with each step checkpointed, as the solver's plans are, within 5%; docs/validation-jax.md)";
  switch (grid_roles_outside_checkpoints(g, plan)) {
    case 2:
      return std::string(
                 "a JAX rollout without step checkpoints, its encoder and decoder outside every checkpoint: XLA "
                 "orders such a program depth-first, which actmem does not model (actmem was 2% to 13% under on "
                 "the 6 such cases") +
             kStepped;
    case 1:
      return std::string(
                 "a JAX rollout without step checkpoints, its encoder or decoder outside every checkpoint: XLA "
                 "orders such a program in post-order (actmem was 1.8% and 1.9% under on the 2 such cases") +
             kStepped;
    default:
      return std::string(
                 "a JAX rollout without step checkpoints: against XLA:TPU actmem was 0.5% to 2.5% over on the 7 "
                 "such cases with the encoder and decoder checkpointed (XLA's list order, as actmem models it") +
             kStepped;
  }
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

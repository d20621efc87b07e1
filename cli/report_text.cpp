#include "report_text.h"

#include <algorithm>

#include <fmt/format.h>

#include "actmem/util/units.h"

namespace actmem::cli {

std::string describe_run(const CostGraph& g, const Device& d) {
  const RunOptions& r = g.run();
  const std::string dtype =
      autocasts(r) ? fmt::format("bfloat16 (torch.autocast, {}'s lists)", to_string(r.autocast)) : to_string(r.dtype);
  return fmt::format("model {} ({:.1f}M parameters), {} {}, batch {}, rollout {}, on {} ({})\n", g.model().name,
                     static_cast<double>(g.parameter_count()) / 1e6, to_string(r.framework), dtype, r.batch, r.rollout,
                     d.id, format_bytes(d.memory_bytes));
}

std::string describe_profile_caveat(const CostGraph& g, const Device& d) {
  // Measured on an H200 (docs/validation-jax.md, "On a GPU").
  if (g.run().framework != Framework::jax || d.id.starts_with("tpu")) return {};
  return "note: actmem's JAX profile is XLA:TPU's; on an H200 it was 1% to 18% under XLA:GPU's figure at rollout 1, "
         "and 80% under at rollout 2 with checkpoints inside the step (docs/validation-jax.md, \"On a GPU\")\n";
}

namespace {

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

}  // namespace

std::string describe_plan_caveat(const CostGraph& g, const Plan& plan) {
  // Measured against XLA:TPU (docs/validation-jax.md; docs/cost-model.md
  // section 4, integrations/jax/schedules.py): XLA orders these modules
  // depth-first where the encoder and decoder are both outside every
  // checkpoint (6 cases, actmem −2.1% to −13.2%), in post-order where one
  // is (2 cases, −1.8%, −1.9%), by its list scheduler, whose order actmem
  // models, where neither is (7 cases, +0.5% to +2.5%).
  if (g.run().framework != Framework::jax || g.run().rollout < 2 || plan.step_checkpoint) return {};
  static constexpr const char* kStepped =
      "; with each step checkpointed, as the solver's plans are, within 5%; docs/validation-jax.md)\n";
  switch (grid_roles_outside_checkpoints(g, plan)) {
    case 2:
      return std::string(
                 "note: a JAX rollout without step checkpoints, its encoder and decoder outside every checkpoint: "
                 "XLA orders such a program depth-first, which actmem does not model (actmem was 2% to 13% under "
                 "on the 6 such cases") +
             kStepped;
    case 1:
      return std::string(
                 "note: a JAX rollout without step checkpoints, its encoder or decoder outside every checkpoint: "
                 "XLA orders such a program in post-order (actmem was 1.8% and 1.9% under on the 2 such cases") +
             kStepped;
    default:
      return std::string(
                 "note: a JAX rollout without step checkpoints: against XLA:TPU actmem was 0.5% to 2.5% over on the "
                 "7 such cases with the encoder and decoder checkpointed (XLA's list order, as actmem models it") +
             kStepped;
  }
}

std::string describe_compiler_remat(const Report& r) {
  if (r.compiler_floor_bytes >= r.peak_bytes || r.peak_bytes <= r.budget_bytes) return {};
  return fmt::format(
      "  {} the compiler's own rematerialisation (XLA recomputes gathers, SiLU, residual adds and "
      "input embeddings when over its limit), which can bring it to about {}\n",
      r.fits ? "fits only through" : "does not fit even after", format_bytes(r.compiler_floor_bytes));
}

std::string describe_report(const Report& r) {
  const MemoryBreakdown& b = r.breakdown;
  std::string text = fmt::format("peak {} of {} budget: {}\n", format_bytes(r.peak_bytes), format_bytes(r.budget_bytes),
                                 r.fits ? "fits" : "does not fit");
  text += describe_compiler_remat(r);
  text += fmt::format("  activations {}, gradients {}, workspace {}\n", format_bytes(b.activations),
                      format_bytes(b.gradients), format_bytes(b.workspace));
  text += fmt::format("  parameters {}, optimizer state {}, inputs {}, reserved {}\n", format_bytes(b.parameters),
                      format_bytes(b.optimizer_state), format_bytes(b.inputs), format_bytes(b.reserved));
  text += fmt::format("peak at: {} pass, {}{}, op {}\n", to_string(r.peak_at.pass), r.peak_at.stage,
                      r.peak_at.block >= 0 ? fmt::format(" block {}", r.peak_at.block) : "", r.peak_at.op);
  text += fmt::format("held for backward after forward: {}\n", format_bytes(r.activation_bytes_after_forward));
  text += fmt::format("compute: forward {:.3g} TFLOP, backward {:.3g} TFLOP, recompute {:.3g} TFLOP (+{:.1f}%)\n",
                      r.forward_flops / 1e12, r.backward_flops / 1e12, r.recompute_flops / 1e12,
                      100.0 * r.recompute_overhead());
  text += fmt::format("step time (roofline): {}\n", format_seconds(r.step_time_s));
  return text;
}

std::string describe_peak_buffers(const std::vector<PeakBuffer>& buffers) {
  std::string text = "buffers live at the peak:\n";
  for (const PeakBuffer& b : buffers) {
    const std::string what = b.tensor.empty()            ? "scratch"
                             : b.category == "gradients" ? "gradient of " + b.tensor
                                                         : b.tensor;
    text += fmt::format("  {:>12}  {}\n", format_bytes(b.bytes), what);
  }
  return text;
}

}  // namespace actmem::cli

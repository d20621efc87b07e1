#include "report_text.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actmem/cost/memory_rules.h"
#include "actmem/util/units.h"

namespace actmem::cli {

std::string describe_run(const CostGraph& g, const Device& d) {
  const RunOptions& r = g.run();
  const std::string dtype =
      autocasts(r) ? fmt::format("bfloat16 (torch.autocast, {}'s lists)", to_string(r.autocast)) : to_string(r.dtype);
  return fmt::format("model {} ({:.1f}M parameters), {} {}, batch {}, rollout {}, on {} ({}){}\n", g.model().name,
                     static_cast<double>(g.parameter_count()) / 1e6, to_string(r.framework), dtype, r.batch, r.rollout,
                     d.id, format_bytes(d.memory_bytes), describe_rules_off(g));
}

std::string describe_rules_off(const CostGraph& g) {
  const RunOptions& r = g.run();
  if (r.rules_off.empty()) return {};
  std::vector<std::string> idle;  // switched off, but not part of this run's profile anyway
  for (const std::string& name : r.rules_off)
    if (const RuleCard* rule = find_rule(name); rule && !rule_applies(*rule, r, g.model().implementation))
      idle.push_back(name);
  return fmt::format(
      ", without rule{} {}{}", r.rules_off.size() > 1 ? "s" : "", fmt::join(r.rules_off, ", "),
      idle.empty() ? "" : fmt::format(" ({} not part of this run's profile anyway)", fmt::join(idle, ", ")));
}

std::string describe_notes(const Report& r) {
  std::string text;
  for (const std::string& note : r.notes) text += "note: " + note + "\n";
  return text;
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

// `actmem fit`: will this training step fit, and with which plan.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/simulate/simulator.h"
#include "actmem/solve/solver.h"
#include "actmem/util/units.h"
#include "commands.h"
#include "report_text.h"
#include "run_setup.h"

namespace actmem::cli {
namespace {

// Catalog devices on which some plan fits as written with the headroom
// kept free, given the least dynamic memory any plan needs (the same on
// every device; only the reserve differs). Not those where a plan fits
// only through the compiler's own rematerialisation (J7), which `fit
// --device` and `sweep` also call fitting: this list is the sure ones.
std::vector<std::string> devices_that_fit(std::int64_t min_peak_bytes, const Device& on,
                                          const std::optional<Headroom>& headroom) {
  const std::int64_t without_reserve = min_peak_bytes - on.reserve_bytes;
  std::vector<std::string> ids;
  for (const Device& d : device_catalog()) {
    const std::int64_t kept = headroom ? headroom->of(d.memory_bytes) : 0;
    if (without_reserve + d.reserve_bytes + kept <= d.memory_bytes) ids.push_back(d.id);
  }
  return ids;
}

// What `fit` found for one run, and what it is compared with.
struct FitAnswer {
  const CostGraph& graph;
  const Device& device;
  std::int64_t budget;    // what plans must fit: the budget less the headroom
  std::int64_t headroom;  // kept free by --headroom (0: none)
  Solution solution;
  Report baseline;  // the run without checkpoints
  std::vector<std::string> devices_that_fit;
};

void print_json_answer(const FitAnswer& a) {
  nlohmann::json out = to_json(a.solution.report);
  out["headroom_bytes"] = a.headroom;
  out["plan"] = plan_to_json(a.solution.plan, a.graph.stages());
  out["min_peak_bytes"] = a.solution.min_peak_bytes;
  out["no_checkpoint_peak_bytes"] = a.baseline.peak_bytes;
  out["no_checkpoint_step_time_s"] = a.baseline.step_time_s;
  out["devices_that_fit"] = a.devices_that_fit;
  if (!a.graph.run().rules_off.empty()) out["rules_off"] = a.graph.run().rules_off;
  print_json(out);
}

void print_fits(const FitAnswer& a) {
  const Report& r = a.solution.report;
  if (r.peak_bytes <= a.budget)
    std::cout << fmt::format("FITS: predicted peak {} of {} budget ({} to spare{})\n", format_bytes(r.peak_bytes),
                             format_bytes(a.budget), format_bytes(a.budget - r.peak_bytes),
                             a.headroom > 0 ? fmt::format(", and the {} headroom", format_bytes(a.headroom)) : "");
  else
    std::cout << fmt::format("FITS: predicted peak {} as written, over the {} budget\n{}", format_bytes(r.peak_bytes),
                             format_bytes(a.budget), describe_compiler_remat(r));
  std::cout << "plan: " << describe(a.solution.plan, a.graph.stages()) << '\n';
  if (a.solution.plan.host_offload)
    std::cout << "  nothing fits with everything on the device; this plan keeps each step checkpoint's frames and the "
                 "targets in host memory (\"host_offload\", docs/plan-format.md), and its step time leaves out "
                 "their transfers; --no-host-offload for the device-only answer\n";
  std::cout << fmt::format("recompute overhead: +{:.1f}% FLOPs; step time {} (without checkpoints {}, needing {})\n",
                           100.0 * r.recompute_overhead(), format_seconds(r.step_time_s),
                           format_seconds(a.baseline.step_time_s), format_bytes(a.baseline.peak_bytes));
}

void print_does_not_fit(const FitAnswer& a, bool nested_regions) {
  const Report& r = a.solution.report;
  std::cout << fmt::format("DOES NOT FIT: the least memory any plan needs is {} (budget {})\n{}",
                           format_bytes(a.solution.min_peak_bytes), format_bytes(a.budget), describe_compiler_remat(r));
  if (a.headroom > 0 && simulate(a.graph, a.device, a.budget + a.headroom, a.solution.plan).fits)
    std::cout << fmt::format(
        "  it would fit the whole {} budget, eating into the headroom; --headroom 0 plans to "
        "the last byte, where actmem's validation does not vouch for the answer\n",
        format_bytes(a.budget + a.headroom));
  std::cout << "least-memory plan: " << describe(a.solution.plan, a.graph.stages()) << '\n';
  std::cout << (a.devices_that_fit.empty()
                    ? std::string{"no catalog device fits as written; reduce batch or rollout"}
                    : fmt::format("catalog devices that fit as written: {}", fmt::join(a.devices_that_fit, ", ")))
            << '\n';
  if (!nested_regions)
    std::cout << "hint: --nested-regions also searches regions inside regions (slower); it can need less "
                 "memory, most at rollout > 1\n";
}

void print_peak(const Report& r) {
  std::cout << fmt::format("peak at: {} pass, {}{}, op {}\n", to_string(r.peak_at.pass), r.peak_at.stage,
                           r.peak_at.block >= 0 ? fmt::format(" block {}", r.peak_at.block) : "", r.peak_at.op);
  const MemoryBreakdown& b = r.breakdown;
  std::cout << fmt::format(
      "at the peak: activations {}, gradients {}, workspace {}, parameters {}, optimizer {}, "
      "inputs {}, reserved {}\n",
      format_bytes(b.activations), format_bytes(b.gradients), format_bytes(b.workspace), format_bytes(b.parameters),
      format_bytes(b.optimizer_state), format_bytes(b.inputs), format_bytes(b.reserved));
}

void print_text_answer(const FitAnswer& a, const RunSetup& setup) {
  std::cout << describe_run(a.graph, a.device) << describe_notes(a.solution.report);
  if (a.headroom > 0)
    std::cout << fmt::format("headroom: {} of the {} budget kept free (--headroom); plans must fit in {}\n",
                             setup.headroom->describe(a.budget + a.headroom), format_bytes(a.budget + a.headroom),
                             format_bytes(a.budget));
  if (a.solution.feasible)
    print_fits(a);
  else
    print_does_not_fit(a, setup.nested_regions);
  print_peak(a.solution.report);
}

}  // namespace

int run_fit(const Args& args) {
  CLI::App app{"Will one training step fit on the device? Finds the fastest plan that fits.", "fit"};
  RunSetup setup;
  setup.add_planning_options(app);
  bool json = false;
  app.add_flag("--json", json, "print the report of the chosen plan as JSON");
  parse(app, args);

  const auto [graph, device, budget] = setup.target();
  Solution solution = solve(graph, device, budget, setup.solver_options());
  const std::int64_t min_peak = solution.min_peak_bytes;
  const FitAnswer answer{graph,
                         device,
                         budget,
                         setup.headroom_bytes(device),
                         std::move(solution),
                         simulate(graph, device, budget, empty_plan(graph.stages())),
                         devices_that_fit(min_peak, device, setup.headroom)};
  if (json)
    print_json_answer(answer);
  else
    print_text_answer(answer, setup);
  return answer.solution.feasible ? 0 : 1;
}

}  // namespace actmem::cli

// `actmem fit`: will this training step fit, and with which plan.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/simulator.h"
#include "actmem/solver.h"
#include "actmem/units.h"
#include "commands.h"
#include "report_text.h"
#include "run_setup.h"

namespace actmem::cli {
namespace {

// Catalog devices on which some plan fits with the headroom kept free,
// given the least dynamic memory any plan needs (the same on every device;
// only the reserve differs).
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

}  // namespace

int run_fit(const Args& args) {
  CLI::App app{"Will one training step fit on the device? Finds the fastest plan that fits.", "fit"};
  RunSetup setup;
  setup.add_options(app);
  setup.add_solver_options(app);
  setup.add_headroom_option(app);
  bool json = false;
  app.add_flag("--json", json, "print the report of the chosen plan as JSON");
  parse(app, args);

  // `budget` is what plans must fit: the budget less the headroom.
  const auto [graph, device, budget] = setup.target();
  const std::int64_t headroom = setup.headroom_bytes(device);
  const Solution solution = solve(graph, device, budget, setup.solver_options());
  const Report baseline = simulate(graph, device, budget, empty_plan(graph.stages()));
  const std::vector<std::string> fitting = devices_that_fit(solution.min_peak_bytes, device, setup.headroom);

  if (json) {
    nlohmann::json out = to_json(solution.report);
    out["headroom_bytes"] = headroom;
    out["plan"] = plan_to_json(solution.plan, graph.stages());
    out["min_peak_bytes"] = solution.min_peak_bytes;
    // null where actmem does not model the memory without checkpoints (J11).
    out["no_checkpoint_peak_bytes"] = baseline.memory_modelled ? nlohmann::json(baseline.peak_bytes) : nlohmann::json();
    out["no_checkpoint_step_time_s"] = baseline.step_time_s;
    out["devices_that_fit"] = fitting;
    print_json(out);
    return solution.feasible ? 0 : 1;
  }

  const Report& r = solution.report;
  std::cout << describe_run(graph, device);
  if (headroom > 0)
    std::cout << fmt::format("headroom: {} of the {} budget kept free (--headroom); plans must fit in {}\n",
                             setup.headroom->describe(budget + headroom), format_bytes(budget + headroom),
                             format_bytes(budget));
  if (solution.feasible) {
    if (r.peak_bytes <= budget)
      std::cout << fmt::format("FITS: predicted peak {} of {} budget ({} to spare{})\n", format_bytes(r.peak_bytes),
                               format_bytes(budget), format_bytes(budget - r.peak_bytes),
                               headroom > 0 ? fmt::format(", and the {} headroom", format_bytes(headroom)) : "");
    else
      std::cout << fmt::format("FITS: predicted peak {} as written, over the {} budget\n{}", format_bytes(r.peak_bytes),
                               format_bytes(budget), describe_compiler_remat(r));
    std::cout << "plan: " << describe(solution.plan, graph.stages()) << '\n';
    std::cout << fmt::format("recompute overhead: +{:.1f}% FLOPs; step time {} (without checkpoints {}, needing {})\n",
                             100.0 * r.recompute_overhead(), format_seconds(r.step_time_s),
                             format_seconds(baseline.step_time_s),
                             baseline.memory_modelled ? format_bytes(baseline.peak_bytes) : "memory not modelled");
  } else {
    std::cout << fmt::format("DOES NOT FIT: the least memory any plan needs is {} (budget {})\n{}",
                             format_bytes(solution.min_peak_bytes), format_bytes(budget), describe_compiler_remat(r));
    if (headroom > 0 && simulate(graph, device, budget + headroom, solution.plan).fits)
      std::cout << fmt::format("  it would fit the whole {} budget, eating into the headroom; --headroom 0 plans to "
                               "the last byte, where actmem's validation does not vouch for the answer\n",
                               format_bytes(budget + headroom));
    std::cout << "least-memory plan: " << describe(solution.plan, graph.stages()) << '\n';
    std::cout << (fitting.empty() ? std::string{"no catalog device fits; reduce batch or rollout"}
                                  : fmt::format("catalog devices that fit: {}", fmt::join(fitting, ", ")))
              << '\n';
    if (!setup.nested_regions)
      std::cout << "hint: --nested-regions also searches regions inside regions (slower); it can need less "
                   "memory, most at rollout > 1\n";
  }
  std::cout << fmt::format("peak at: {} pass, {}{}, op {}\n", to_string(r.peak_at.pass), r.peak_at.stage,
                           r.peak_at.block >= 0 ? fmt::format(" block {}", r.peak_at.block) : "", r.peak_at.op);
  const MemoryBreakdown& b = r.breakdown;
  std::cout << fmt::format("at the peak: activations {}, gradients {}, workspace {}, parameters {}, optimizer {}, "
                           "inputs {}, reserved {}\n",
                           format_bytes(b.activations), format_bytes(b.gradients), format_bytes(b.workspace),
                           format_bytes(b.parameters), format_bytes(b.optimizer_state), format_bytes(b.inputs),
                           format_bytes(b.reserved));
  return solution.feasible ? 0 : 1;
}

}  // namespace actmem::cli

// `actmem simulate`: predict one training step's memory and time for a plan.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/plan/output_files.h"
#include "actmem/plan/plan_document.h"
#include "actmem/simulate/simulator.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/units.h"
#include "commands.h"
#include "report_text.h"
#include "run_setup.h"

namespace actmem::cli {

int run_simulate(const Args& args) {
  CLI::App app{"Simulate one training step under a plan: peak memory, where it happens, FLOPs and time.", "simulate"};
  RunSetup setup;
  setup.add_options(app);
  std::string plan_name = "none";
  std::string timeline_path;
  bool json = false;
  int peak_buffers = 0;
  app.add_option("--plan", plan_name, "plan file, or none, full, every:K, deepmind, deepmind:B")->capture_default_str();
  app.add_option("--timeline", timeline_path,
                 fmt::format("write the memory timeline (one row per op run, at most {}) as CSV", kMaxTimelineRows));
  app.add_flag("--json", json, "print the report as JSON");
  app.add_option_function<std::string>(
      "--peak-buffers",
      [&](const std::string& v) { peak_buffers = static_cast<int>(parse_integer(v, "--peak-buffers", 1, 1000000)); },
      "list the N largest buffers live at the peak, 1..1000000 (JSON: live_at_peak)");
  parse(app, args);

  // A plan file carries its model, run, device and budget; options given on
  // the command line override them (the model must still match).
  const PlanChoice choice(plan_name);
  const auto [graph, device, budget] = setup.target(choice.document, app);
  const Plan plan = choice.plan(graph);
  SimulationOptions options;
  options.record_timeline = !timeline_path.empty();
  options.record_peak_buffers = peak_buffers > 0;
  Report report = simulate(graph, device, budget, plan, options);
  if (!timeline_path.empty()) write_file_atomically(timeline_path, timeline_csv(report));
  if (report.live_at_peak.size() > static_cast<std::size_t>(peak_buffers))
    report.live_at_peak.resize(static_cast<std::size_t>(peak_buffers));

  if (json) {
    nlohmann::json out = to_json(report);
    out["plan"] = plan_to_json(plan, graph.stages());
    if (peak_buffers > 0) out["live_at_peak"] = to_json(report.live_at_peak);
    if (!graph.run().rules_off.empty()) out["rules_off"] = graph.run().rules_off;
    print_json(out);
  } else {
    std::cout << describe_run(graph, device) << describe_notes(report) << "plan: " << describe(plan, graph.stages())
              << "\n\n"
              << describe_report(report);
    if (peak_buffers > 0) std::cout << describe_peak_buffers(report.live_at_peak);
  }
  return report.fits ? 0 : 1;
}

}  // namespace actmem::cli

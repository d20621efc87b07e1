// `actmem simulate`: predict one training step's memory and time for a plan.
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/error.h"
#include "actmem/plan_document.h"
#include "actmem/simulator.h"
#include "actmem/units.h"
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
  app.add_option("--plan", plan_name, "plan file, or none, full, every:K, deepmind, deepmind:B")->capture_default_str();
  app.add_option("--timeline", timeline_path, "write the memory timeline (one row per op) as CSV");
  app.add_flag("--json", json, "print the report as JSON");
  parse(app, args);

  // A plan file carries its model, run, device and budget; options given on
  // the command line override them (the model must still match).
  const PlanChoice choice(plan_name);
  const auto [graph, device, budget] = setup.target(choice.document, app);
  const Plan plan = choice.plan(graph);
  SimulationOptions options;
  options.record_timeline = !timeline_path.empty();
  const Report report = simulate(graph, device, budget, plan, options);
  if (!timeline_path.empty()) write_file_atomically(timeline_path, timeline_csv(report));

  if (json) {
    nlohmann::json out = to_json(report);
    out["plan"] = regions_and_blocks_to_json(plan, graph.stages());
    print_json(out);
  } else {
    std::cout << describe_run(graph, device) << "plan: " << describe(plan, graph.stages()) << "\n\n"
              << describe_report(report);
  }
  return report.fits ? 0 : 1;
}

}  // namespace actmem::cli

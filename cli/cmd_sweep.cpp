// `actmem sweep`: fits / peak / overhead over devices, batches and rollouts.
#include <iostream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/error.h"
#include "actmem/solver.h"
#include "actmem/units.h"
#include "commands.h"
#include "progress_line.h"
#include "run_setup.h"

namespace actmem::cli {
namespace {

std::vector<std::int64_t> parse_list(const std::string& text, const std::string& option) {
  std::vector<std::int64_t> values;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    std::size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 1)
      throw InputError(option, "", fmt::format("expected a comma-separated list of positive integers, got '{}'", text));
    values.push_back(v);
  }
  if (values.empty()) throw InputError(option, "", "expected at least one value");
  return values;
}

}  // namespace

int run_sweep(const Args& args) {
  CLI::App app{"Tabulate fits / peak / overhead over devices, batch sizes and rollouts, for choosing hardware.", "sweep"};
  RunSetup setup;
  setup.add_options(app, /*batch_and_rollout=*/false);
  setup.add_solver_options(app);
  std::string devices = "all", batches = "1", rollouts = "1";
  bool json = false;
  app.add_option("--devices", devices, "comma-separated catalog ids, or all")->capture_default_str();
  app.add_option("--batch", batches, "comma-separated batch sizes")->capture_default_str();
  app.add_option("--rollout", rollouts, "comma-separated rollout lengths")->capture_default_str();
  app.add_flag("--json", json, "print the table as JSON");
  parse(app, args);

  std::vector<Device> targets;
  if (devices == "all") {
    targets = device_catalog();
  } else {
    std::stringstream in(devices);
    std::string id;
    while (std::getline(in, id, ',')) targets.push_back(load_device(id));
  }
  const std::vector<std::int64_t> rollout_list = parse_list(rollouts, "--rollout");
  const std::vector<std::int64_t> batch_list = parse_list(batches, "--batch");
  const ModelDescription model = setup.load_model();
  nlohmann::json rows = nlohmann::json::array();
  ProgressLine progress("actmem sweep", setup.quiet);
  const int steps = static_cast<int>(rollout_list.size() * batch_list.size() * targets.size());
  if (!json)
    std::cout << fmt::format("{:<14} {:>5} {:>7} {:>5} {:>11} {:>11} {:>9} {:>10}\n", "device", "batch", "rollout",
                             "fits", "peak", "budget", "recompute", "step time");
  for (std::int64_t rollout : rollout_list) {
    for (std::int64_t batch : batch_list) {
      RunSetup s = setup;
      s.batch = batch;
      s.rollout = rollout;
      const CostGraph graph = CostGraph::build(model, s.run_options());
      for (const Device& d : targets) {
        progress.update(fmt::format("{}, batch {}, rollout {}", d.id, batch, rollout), static_cast<int>(rows.size()) + 1,
                        steps);
        const std::int64_t budget = s.budget_bytes(d);
        const Solution sol = solve(graph, d, budget, setup.solver_options());
        const Report& r = sol.report;
        rows.push_back({{"device", d.id},
                        {"batch", batch},
                        {"rollout", rollout},
                        {"fits", sol.feasible},
                        {"peak_bytes", r.peak_bytes},
                        {"min_peak_bytes", sol.min_peak_bytes},
                        {"budget_bytes", budget},
                        {"recompute_overhead", r.recompute_overhead()},
                        {"step_time_s", r.step_time_s}});
        progress.clear();
        if (!json)
          std::cout << fmt::format("{:<14} {:>5} {:>7} {:>5} {:>11} {:>11} {:>9} {:>10}\n", d.id, batch, rollout,
                                   sol.feasible ? "yes" : "no", format_bytes(sol.feasible ? r.peak_bytes : sol.min_peak_bytes),
                                   format_bytes(budget),
                                   sol.feasible ? fmt::format("+{:.1f}%", 100.0 * r.recompute_overhead()) : "-",
                                   sol.feasible ? format_seconds(r.step_time_s) : "-");
      }
    }
  }
  if (json) print_json(rows);
  return 0;
}

}  // namespace actmem::cli

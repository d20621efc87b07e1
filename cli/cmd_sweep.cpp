// `actmem sweep`: fits / peak / overhead over devices, batches and rollouts.
#include <algorithm>
#include <array>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/solve/solver.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/units.h"
#include "commands.h"
#include "progress_line.h"
#include "run_setup.h"

namespace actmem::cli {
namespace {

// "a,b,c" split at commas; an empty item is an error.
std::vector<std::string> split_list(const std::string& text, const std::string& option, const char* expected) {
  std::vector<std::string> items;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    items.push_back(text.substr(start, comma - start));
    if (items.back().empty())
      throw InputError(option, "", fmt::format("expected a comma-separated list of {}, got '{}'", expected, text));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::vector<std::int64_t> parse_list(const std::string& text, const std::string& option, std::int64_t max) {
  std::vector<std::int64_t> values;
  for (const std::string& item : split_list(text, option, "positive integers")) {
    if (item.find_first_not_of("0123456789") != std::string::npos)
      throw InputError(option, "", fmt::format("expected a comma-separated list of positive integers, got '{}'", text));
    values.push_back(parse_integer(item, option, 1, max));
  }
  return values;
}

// Catalog ids or device files; errors name --devices.
std::vector<Device> load_devices(const std::vector<std::string>& ids) {
  if (ids.size() == 1 && ids.front() == "all") return device_catalog();
  std::vector<Device> devices;
  for (const std::string& id : ids) {
    try {
      devices.push_back(load_device(id));
    } catch (const InputError& e) {
      if (!e.is_argument() || e.source() != "device") throw;
      throw e.renamed("devices");
    }
  }
  return devices;
}

std::string table_row(const std::array<std::string, 8>& cells) {
  return fmt::format("{:<14} {:>5} {:>7} {:>5} {:>11} {:>11} {:>9} {:>10}\n", cells[0], cells[1], cells[2], cells[3],
                     cells[4], cells[5], cells[6], cells[7]);
}

}  // namespace

int run_sweep(const Args& args) {
  CLI::App app{"Tabulate fits / peak / overhead over devices, batch sizes and rollouts, for choosing hardware.",
               "sweep"};
  RunSetup setup;
  setup.add_options(app, /*batch_and_rollout=*/false);
  setup.add_solver_options(app);
  setup.add_headroom_option(app);
  std::vector<std::string> device_ids{"all"};
  std::vector<std::int64_t> batch_list{1}, rollout_list{1};
  bool json = false;
  app.add_option_function<std::string>(
         "--devices", [&](const std::string& v) { device_ids = split_list(v, "--devices", "device ids or files"); },
         "comma-separated catalog ids or device files, or all")
      ->default_str("all");
  app.add_option_function<std::string>(
         "--batch", [&](const std::string& v) { batch_list = parse_list(v, "--batch", kMaxBatch); },
         "comma-separated batch sizes")
      ->default_str("1");
  app.add_option_function<std::string>(
         "--rollout", [&](const std::string& v) { rollout_list = parse_list(v, "--rollout", kMaxRollout); },
         fmt::format("comma-separated rollout lengths; devices × batches × rollouts at most {} rows", kMaxSweepRows))
      ->default_str("1");
  app.add_flag("--json", json, "print the table as JSON");
  parse(app, args);

  const std::vector<Device> targets = load_devices(device_ids);
  const std::size_t rows_asked = targets.size() * batch_list.size() * rollout_list.size();
  if (rows_asked > static_cast<std::size_t>(kMaxSweepRows))
    throw InputError("sweep", "",
                     fmt::format("{} devices × {} batch sizes × {} rollouts is {} rows; expected at most {}",
                                 targets.size(), batch_list.size(), rollout_list.size(), rows_asked, kMaxSweepRows));
  const ModelDescription model = setup.load_model();
  for (const Device& d : targets) setup.budget_bytes(d);  // a --budget above any device's memory is refused first
  // Printed at the end: an error in any row leaves no partial table.
  nlohmann::json rows = nlohmann::json::array();
  std::string table = table_row({"device", "batch", "rollout", "fits", "peak", "budget", "recompute", "step time"});
  ProgressLine progress("actmem sweep", setup.quiet);
  const int steps = static_cast<int>(rows_asked);
  for (std::int64_t rollout : rollout_list) {
    for (std::int64_t batch : batch_list) {
      RunOptions run = setup.run;
      run.batch = batch;
      run.rollout = rollout;
      const CostGraph graph = CostGraph::build(model, run);
      for (const Device& d : targets) {
        progress.update(fmt::format("{}, batch {}, rollout {}", d.id, batch, rollout),
                        static_cast<int>(rows.size()) + 1, steps);
        // A headroom of a whole device's memory leaves nothing: nothing fits there.
        const std::int64_t budget = std::max<std::int64_t>(setup.budget_bytes(d) - setup.headroom_bytes(d), 0);
        const Solution sol = solve(graph, d, budget, setup.solver_options());
        const Report& r = sol.report;
        rows.push_back({{"device", d.id},
                        {"batch", batch},
                        {"rollout", rollout},
                        {"fits", sol.feasible},
                        {"peak_bytes", r.peak_bytes},
                        {"min_peak_bytes", sol.min_peak_bytes},
                        {"budget_bytes", budget},
                        {"headroom_bytes", setup.headroom_bytes(d)},
                        {"recompute_overhead", r.recompute_overhead()},
                        {"step_time_s", r.step_time_s}});
        table += table_row({d.id, std::to_string(batch), std::to_string(rollout), sol.feasible ? "yes" : "no",
                            format_bytes(sol.feasible ? r.peak_bytes : sol.min_peak_bytes), format_bytes(budget),
                            sol.feasible ? fmt::format("+{:.1f}%", 100.0 * r.recompute_overhead()) : "-",
                            sol.feasible ? format_seconds(r.step_time_s) : "-"});
      }
    }
  }
  progress.clear();
  if (json)
    print_json(rows);
  else
    std::cout << table;
  return 0;
}

}  // namespace actmem::cli

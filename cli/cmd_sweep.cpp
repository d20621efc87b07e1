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

// What a sweep is asked: the options planning commands share (no single
// batch or rollout), and the lists it tabulates.
struct SweepRequest {
  RunSetup setup;
  std::vector<std::string> device_ids{"all"};
  std::vector<std::int64_t> batches{1}, rollouts{1};
  bool json = false;
};

// The command line, each value checked as it is parsed.
SweepRequest parse_sweep(const Args& args) {
  CLI::App app{"Tabulate fits / peak / overhead over devices, batch sizes and rollouts, for choosing hardware.",
               "sweep"};
  SweepRequest r;
  r.setup.add_options(app, /*one_run=*/false);
  r.setup.add_solver_options(app);
  r.setup.add_headroom_option(app);
  app.add_option_function<std::string>(
         "--devices", [&](const std::string& v) { r.device_ids = split_list(v, "--devices", "device ids or files"); },
         "comma-separated catalog ids or device files, or all")
      ->default_str("all");
  app.add_option_function<std::string>(
         "--batch", [&](const std::string& v) { r.batches = parse_list(v, "--batch", kMaxBatch); },
         "comma-separated batch sizes")
      ->default_str("1");
  app.add_option_function<std::string>(
         "--rollout", [&](const std::string& v) { r.rollouts = parse_list(v, "--rollout", kMaxRollout); },
         fmt::format("comma-separated rollout lengths; devices × batches × rollouts at most {} rows", kMaxSweepRows))
      ->default_str("1");
  app.add_flag("--json", r.json, "print the table as JSON");
  parse(app, args);
  return r;
}

// The devices asked for, refused where devices × batches × rollouts is
// more than kMaxSweepRows rows.
std::vector<Device> sweep_devices(const SweepRequest& r) {
  std::vector<Device> devices = load_devices(r.device_ids);
  const std::size_t rows = devices.size() * r.batches.size() * r.rollouts.size();
  if (rows > static_cast<std::size_t>(kMaxSweepRows))
    throw InputError("sweep", "",
                     fmt::format("{} devices × {} batch sizes × {} rollouts is {} rows; expected at most {}",
                                 devices.size(), r.batches.size(), r.rollouts.size(), rows, kMaxSweepRows));
  return devices;
}

// The sweep's rows as JSON and as the table, gathered row by row and
// printed at the end: an error in any row leaves no partial table.
struct SweepTable {
  nlohmann::json rows = nlohmann::json::array();
  std::string text = table_row({"device", "batch", "rollout", "fits", "peak", "budget", "recompute", "step time"});

  void add(const Device& d, const RunOptions& run, std::int64_t budget, std::int64_t headroom, const Solution& sol) {
    const Report& r = sol.report;
    rows.push_back({{"device", d.id},
                    {"batch", run.batch},
                    {"rollout", run.rollout},
                    {"fits", sol.feasible},
                    {"host_offload", sol.plan.host_offload},
                    {"peak_bytes", r.peak_bytes},
                    {"min_peak_bytes", sol.min_peak_bytes},
                    {"budget_bytes", budget},
                    {"headroom_bytes", headroom},
                    {"recompute_overhead", r.recompute_overhead()},
                    {"step_time_s", r.step_time_s}});
    // "host": fits with the rollout's per-step state in host memory (Plan::host_offload).
    const char* fits = !sol.feasible ? "no" : sol.plan.host_offload ? "host" : "yes";
    text += table_row({d.id, std::to_string(run.batch), std::to_string(run.rollout), fits,
                       format_bytes(sol.feasible ? r.peak_bytes : sol.min_peak_bytes), format_bytes(budget),
                       sol.feasible ? fmt::format("+{:.1f}%", 100.0 * r.recompute_overhead()) : "-",
                       sol.feasible ? format_seconds(r.step_time_s) : "-"});
  }
};

// One graph per (rollout, batch), solved on every device, rows in that order.
SweepTable sweep(const SweepRequest& request, const ModelDescription& model, const std::vector<Device>& devices) {
  const RunSetup& setup = request.setup;
  SweepTable table;
  ProgressLine progress("actmem sweep", setup.quiet);
  const auto steps = static_cast<int>(request.batches.size() * request.rollouts.size());  // one per graph
  for (std::int64_t rollout : request.rollouts) {
    for (std::int64_t batch : request.batches) {
      RunOptions run = setup.run;
      run.batch = batch;
      run.rollout = rollout;
      const CostGraph graph = CostGraph::build(model, run);
      progress.update(fmt::format("batch {}, rollout {}", batch, rollout),
                      static_cast<int>(table.rows.size() / devices.size()) + 1, steps);
      // A headroom of a whole device's memory leaves nothing: nothing fits there.
      std::vector<std::int64_t> budgets;
      for (const Device& d : devices)
        budgets.push_back(std::max<std::int64_t>(setup.budget_bytes(d) - setup.headroom_bytes(d), 0));
      const std::vector<Solution> solutions = solve_each(graph, devices, budgets, setup.solver_options());
      for (std::size_t i = 0; i < devices.size(); ++i)
        table.add(devices[i], run, budgets[i], setup.headroom_bytes(devices[i]), solutions[i]);
    }
  }
  progress.clear();
  return table;
}

}  // namespace

int run_sweep(const Args& args) {
  const SweepRequest request = parse_sweep(args);
  const std::vector<Device> devices = sweep_devices(request);
  const ModelDescription model = request.setup.load_model();
  for (const Device& d : devices)
    request.setup.budget_bytes(d);  // a --budget above any device's memory is refused first
  const SweepTable table = sweep(request, model, devices);
  if (request.json)
    print_json(table.rows);
  else
    std::cout << table.text;
  return 0;
}

}  // namespace actmem::cli

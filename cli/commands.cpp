#include "commands.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/util/suggest.h"

namespace actmem::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table{
      {"fit", "will one training step fit on the device, and with which plan", run_fit},
      {"plan", "write the fastest plan that fits as JSON for trainers", run_plan},
      {"sweep", "tabulate fits and overhead over devices, batches and rollouts", run_sweep},
      {"simulate", "predict one training step's memory and time under a plan", run_simulate},
      {"report", "draw one step's memory, trade-offs, catalog and plan as one HTML file", run_report},
      {"mesh", "compute GraphCast's node and edge counts from the geometry", run_mesh},
      {"models", "list the built-in model presets", run_models},
      {"devices", "list the device catalog", run_devices},
      {"rules", "list the memory rules (switch one off with --rule-off)", run_rules},
  };
  return table;
}

namespace {

std::vector<std::string> option_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& n : option->get_lnames()) names.push_back("--" + n);
    for (const std::string& n : option->get_snames()) names.push_back("-" + n);
  }
  return names;
}

// The words CLI11 left over, in command-line order: an unknown option
// (with a suggestion), or else the unexpected arguments.
UsageError extras_error(const CLI::App& app, const Args& args) {
  const auto known = option_names(app);
  for (const std::string& a : args) {
    if (a.size() < 2 || a[0] != '-') continue;
    const std::string name = a.substr(0, a.find('='));
    if (std::find(known.begin(), known.end(), name) == known.end())
      return UsageError(fmt::format("{}: unknown option '{}'{}; see 'actmem {} --help'", app.get_name(), name,
                                    did_you_mean(name, known), app.get_name()));
  }
  std::vector<std::string> extras = app.remaining();
  return UsageError(fmt::format("{}: unexpected argument{} '{}'; see 'actmem {} --help'", app.get_name(),
                                extras.size() > 1 ? "s" : "", fmt::join(extras, "' '"), app.get_name()));
}

bool parse_only = false;

}  // namespace

void stop_after_parsing(bool on) { parse_only = on; }

void parse(CLI::App& app, const Args& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes the words last first
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    throw ExitRequest{0};
  } catch (const CLI::ExtrasError&) {
    throw extras_error(app, args);
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("{}: {}; see 'actmem {} --help'", app.get_name(), e.what(), app.get_name()));
  }
  if (parse_only) throw ExitRequest{0};
}

void print_json(const nlohmann::json& value) { std::cout << dump(value) << '\n'; }

std::string dump(const nlohmann::json& value) {
  return value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace actmem::cli

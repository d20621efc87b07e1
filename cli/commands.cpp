#include "commands.h"

#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/suggest.h"

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

}  // namespace

void parse(CLI::App& app, const Args& args) {
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    throw ExitRequest{0};
  } catch (const CLI::ExtrasError& e) {
    // The first unexpected word, with a suggestion when it looks like an option.
    std::string first;
    for (const std::string& a : args) {
      if (a.starts_with("-")) {
        const std::string name = a.substr(0, a.find('='));
        const auto known = option_names(app);
        if (std::find(known.begin(), known.end(), name) == known.end()) {
          first = name;
          break;
        }
      }
    }
    if (!first.empty())
      throw UsageError(fmt::format("{}: unknown option '{}'{}; see 'actmem {} --help'", app.get_name(), first,
                                   did_you_mean(first, option_names(app)), app.get_name()));
    throw UsageError(fmt::format("{}: {}; see 'actmem {} --help'", app.get_name(), e.what(), app.get_name()));
  } catch (const CLI::ParseError& e) {
    throw UsageError(fmt::format("{}: {}; see 'actmem {} --help'", app.get_name(), e.what(), app.get_name()));
  }
}

void print_json(const nlohmann::json& value) { std::cout << value.dump(2) << '\n'; }

}  // namespace actmem::cli

// `actmem models`, `actmem devices` and `actmem rules`: what is built in.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/cost/memory_rules.h"
#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/util/units.h"
#include "commands.h"

namespace actmem::cli {

int run_models(const Args& args) {
  CLI::App app{"List the built-in model presets (use a name with --model).", "models"};
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");
  parse(app, args);

  nlohmann::json list = nlohmann::json::array();
  if (!json)
    std::cout << fmt::format("{:<22} {:>6} {:>5} {:>10} {:>8} {:>10} {:>10} {:>10} {:>5} {:>11}\n", "preset", "res",
                             "level", "grid", "mesh", "grid2mesh", "mesh", "mesh2grid", "steps", "parameters")
              << fmt::format("{:<22} {:>6} {:>5} {:>10} {:>8} {:>10} {:>10} {:>10} {:>5} {:>11}\n", "", "", "", "nodes",
                             "nodes", "edges", "edges", "edges", "", "");
  for (const std::string& name : preset_names()) {
    const ModelDescription m = load_model(name);
    const std::int64_t parameters = parameter_count(m);  // the builder's declaration, counted
    nlohmann::json entry = to_json(m);
    entry["parameters"] = parameters;
    entry["fingerprint"] = fingerprint(m);
    list.push_back(entry);
    if (!json)
      std::cout << fmt::format("{:<22} {:>5}° {:>5} {:>10} {:>8} {:>10} {:>10} {:>10} {:>5} {:>11}\n", name,
                               m.resolution_deg.value_or(0), m.mesh_level.value_or(0), m.grid_nodes, m.mesh_nodes,
                               m.grid2mesh_edges, m.mesh_edges, m.mesh2grid_edges, m.processor_steps, parameters);
  }
  if (json) print_json(list);
  return 0;
}

int run_devices(const Args& args) {
  CLI::App app{"List the device catalog (use an id with --device).", "devices"};
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");
  parse(app, args);

  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const Device& d : device_catalog()) list.push_back(to_json(d));
    print_json(list);
    return 0;
  }
  std::cout << fmt::format("{:<14} {:>11} {:>11} {:>11} {:>11} {:>10}  {}\n", "id", "memory", "reserve", "bf16 TF/s",
                           "fp32 TF/s", "TB/s", "name");
  for (const Device& d : device_catalog())
    std::cout << fmt::format("{:<14} {:>11} {:>11} {:>11} {:>11.1f} {:>10.2f}  {}\n", d.id,
                             format_bytes(d.memory_bytes), format_bytes(d.reserve_bytes),
                             d.peak_bf16_flops > 0 ? fmt::format("{:.0f}", d.peak_bf16_flops / 1e12) : "-",
                             d.peak_fp32_flops / 1e12, d.bandwidth_bytes_per_s / 1e12, d.name);
  return 0;
}

int run_rules(const Args& args) {
  CLI::App app{
      "List the memory rules: what actmem knows of each framework beyond the derivatives (switch one off "
      "with --rule-off NAME; docs/rules/ has a card for each).",
      "rules"};
  bool json = false;
  app.add_flag("--json", json, "machine-readable output");
  parse(app, args);

  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const RuleCard& rule : rule_cards()) list.push_back(to_json(rule));
    print_json(list);
    return 0;
  }
  std::size_t width = 0;
  for (const RuleCard& rule : rule_cards()) width = std::max(width, rule.name.size());
  for (const RuleCard& rule : rule_cards())
    std::cout << fmt::format("{:<{}}  {:<7}  {}  [{}; {}]\n", rule.name, width, to_string(rule.framework), rule.effect,
                             describe(rule.when), rule.journal);
  return 0;
}

}  // namespace actmem::cli

// Config text a user pastes: YAML for Hydra/OmegaConf trainers (PhysicsNeMo,
// anemoi), Python assignments for DeepMind's code. Keys come out in the
// JSON object's (sorted) order; scalars as each language writes them.
#include <string>

#include <fmt/format.h>

#include "plan/trainer_knobs.h"

namespace actmem::detail {
namespace {

std::string yaml_scalar(const nlohmann::json& v) {
  if (v.is_null()) return "null";
  return v.dump();  // true/false, numbers; strings quoted
}

void yaml_lines(const nlohmann::json& object, int indent, std::string& out) {
  for (const auto& [key, value] : object.items()) {
    if (value.is_object()) {
      out += fmt::format("{:{}}{}:\n", "", indent, key);
      yaml_lines(value, indent + 2, out);
    } else {
      out += fmt::format("{:{}}{}: {}\n", "", indent, key, yaml_scalar(value));
    }
  }
}

}  // namespace

std::string python_literal(const nlohmann::json& v) {
  if (v.is_null()) return "None";
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_object()) {
    std::string s = "dict(";
    bool first = true;
    for (const auto& [key, value] : v.items()) {
      s += fmt::format("{}{}={}", first ? "" : ", ", key, python_literal(value));
      first = false;
    }
    return s + ")";
  }
  return v.dump();
}

std::string yaml_snippet(const nlohmann::json& config) {
  std::string out;
  yaml_lines(config, 0, out);
  return out;
}

std::string python_snippet(const nlohmann::json& config) {
  std::string out;
  for (const auto& [key, value] : config.items()) out += fmt::format("{} = {}\n", key, python_literal(value));
  return out;
}

}  // namespace actmem::detail

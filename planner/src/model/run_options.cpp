#include "actmem/model/run_options.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/suggest.h"
#include "util/json_fields.h"

namespace actmem {
namespace {

template <typename Enum, std::size_t N>
Enum parse_enum(std::string_view text, const std::string& source, const std::pair<const char*, Enum> (&names)[N]) {
  std::vector<std::string> known;
  for (const auto& [name, value] : names) {
    if (text == name) return value;
    known.emplace_back(name);
  }
  throw InputError(
      source, "",
      fmt::format("expected one of {}, got '{}'{}", fmt::join(known, ", "), text, did_you_mean(text, known)));
}

const std::pair<const char*, DType> kDTypes[] = {{"float32", DType::float32}, {"bfloat16", DType::bfloat16}};
const std::pair<const char*, Framework> kFrameworks[] = {{"pytorch", Framework::pytorch}, {"jax", Framework::jax}};
const std::pair<const char*, Optimizer> kOptimizers[] = {{"adam", Optimizer::adam}, {"sgd", Optimizer::sgd}};
const std::pair<const char*, Autocast> kAutocasts[] = {{"cuda", Autocast::cuda}, {"cpu", Autocast::cpu}};

}  // namespace

int element_bytes(DType dtype) { return dtype == DType::float32 ? 4 : 2; }

std::string to_string(DType dtype) { return dtype == DType::float32 ? "float32" : "bfloat16"; }
std::string to_string(Framework framework) { return framework == Framework::pytorch ? "pytorch" : "jax"; }
std::string to_string(Optimizer optimizer) { return optimizer == Optimizer::adam ? "adam" : "sgd"; }
std::string to_string(Autocast autocast) { return autocast == Autocast::cuda ? "cuda" : "cpu"; }

void RunOptions::add_rule_off(const std::string& name) {
  const auto at = std::lower_bound(rules_off.begin(), rules_off.end(), name);
  if (at == rules_off.end() || *at != name) rules_off.insert(at, name);
}

bool autocasts(const RunOptions& run) { return run.framework == Framework::pytorch && run.dtype == DType::bfloat16; }

DType parse_dtype(std::string_view text, const std::string& source) { return parse_enum(text, source, kDTypes); }
Framework parse_framework(std::string_view text, const std::string& source) {
  return parse_enum(text, source, kFrameworks);
}
Optimizer parse_optimizer(std::string_view text, const std::string& source) {
  return parse_enum(text, source, kOptimizers);
}
Autocast parse_autocast(std::string_view text, const std::string& source) {
  return parse_enum(text, source, kAutocasts);
}

void validate(const RunOptions& run) {
  if (run.batch < 1 || run.batch > kMaxBatch)
    throw InputError::argument("batch", fmt::format("expected an integer from 1 to {}, got {}", kMaxBatch, run.batch));
  if (run.rollout < 1 || run.rollout > kMaxRollout)
    throw InputError::argument("rollout",
                               fmt::format("expected an integer from 1 to {}, got {}", kMaxRollout, run.rollout));
  if (run.rules_off.size() > kMaxRulesOff)
    throw InputError::argument("rules_off",
                               fmt::format("expected at most {} rules, got {}", kMaxRulesOff, run.rules_off.size()));
  if (std::adjacent_find(run.rules_off.begin(), run.rules_off.end(), std::greater_equal<>()) != run.rules_off.end())
    throw InputError::argument("rules_off", "expected rule names sorted, without repeats");
}

nlohmann::json to_json(const RunOptions& run) {
  nlohmann::json j{{"dtype", to_string(run.dtype)},
                   {"batch", run.batch},
                   {"rollout", run.rollout},
                   {"framework", to_string(run.framework)},
                   {"optimizer", to_string(run.optimizer)}};
  if (autocasts(run)) j["autocast"] = to_string(run.autocast);
  // Only where a rule is off: the plans of full runs stay as they were.
  if (!run.rules_off.empty()) j["rules_off"] = run.rules_off;
  return j;
}

RunOptions run_options_from_json(const nlohmann::json& object, const std::string& source, const std::string& pointer) {
  const detail::FieldReader in(object, source, pointer);
  in.reject_unknown_fields({"dtype", "batch", "rollout", "framework", "optimizer", "autocast", "rules_off"});
  RunOptions run;
  run.dtype = parse_dtype(in.string("dtype"), source + ": " + in.pointer_to("dtype"));
  run.batch = in.positive_int("batch", kMaxBatch);
  run.rollout = in.positive_int("rollout", kMaxRollout);
  run.framework = parse_framework(in.string("framework"), source + ": " + in.pointer_to("framework"));
  run.optimizer = parse_optimizer(in.string("optimizer"), source + ": " + in.pointer_to("optimizer"));
  // Absent in plans written before it existed: they meant CUDA's lists too.
  if (const auto autocast = in.optional_string("autocast"))
    run.autocast = parse_autocast(*autocast, source + ": " + in.pointer_to("autocast"));
  // Names only: the cost layer knows the rules (check_rule_names).
  if (in.has("rules_off"))
    for (std::string& name : in.name_array("rules_off", kMaxRulesOff)) run.add_rule_off(name);
  return run;
}

}  // namespace actmem

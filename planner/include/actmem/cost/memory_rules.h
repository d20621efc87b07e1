#pragma once
// The memory rules: what actmem knows of how a framework runs a training
// step beyond the derivatives' own residuals, one observation each: what
// XLA:TPU or PyTorch keeps, copies, fuses, lays out or orders (docs/rules/,
// one card per rule; `actmem rules` lists them). Each rule has a name that
// says what it does, the framework it belongs to, when it applies to a run,
// and the journal entry of the measurement that shows it (docs/cost-model.md).
//
// A run applies every rule of its framework that applies to it, except the
// ones it names in RunOptions::rules_off: switching one off shows what it
// contributes to a prediction (`--rule-off NAME`).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actmem/model/model.h"
#include "actmem/model/run_options.h"

namespace actmem {

// When a rule applies to a run of its framework: every field must hold.
struct RuleCondition {
  enum class DTypes { any, bfloat16, float32 } dtype = DTypes::any;
  enum class Batches { any, one, several } batch = Batches::any;
  // How the implementation aggregates messages (PyTorch): deepmind's
  // index_add, or physicsnemo's and anemoi's scatter_add_ into zeros.
  enum class Aggregation { any, index_add, scatter_add_into_zeros } aggregation = Aggregation::any;
};

// "always", "bfloat16", "batch 1", "float32, batch > 1", "implementation deepmind"…
std::string describe(const RuleCondition& condition);

struct RuleCard {
  std::string_view name;    // "xla.scan.holds_first_carry": framework, where, what
  Framework framework;      // the rule is part of this framework's profile only
  RuleCondition when;       // and of the runs of it that this holds for
  std::string_view effect;  // what it does to the step, one sentence
  // The measurement that shows it: journal entries ("J20, J26", in
  // docs/cost-model.md) or the document of it.
  std::string_view journal;
};

// Every rule, in the order `actmem rules` lists them.
std::span<const RuleCard> rule_cards();

// {name, framework, applies (describe(when)), effect, journal}: what
// `actmem rules --json` and the Python module's rules() list.
nlohmann::json to_json(const RuleCard& rule);

// The rule of that name, or nullptr.
const RuleCard* find_rule(std::string_view name);

// Whether the rule is part of the run's profile: its framework, and its
// condition on the dtype, batch and implementation (RuleCard::when).
// Independent of RunOptions::rules_off.
bool rule_applies(const RuleCard& rule, const RunOptions& run, Implementation implementation);

// Checks that every name is a rule's; throws InputError(source, field, …)
// naming the first unknown one, with the closest name ("did you mean").
void check_rule_names(std::span<const std::string> names, const std::string& source, const std::string& field = "");

}  // namespace actmem

// The architectures: CostGraph::build(), parameter_count() and the model
// readers look the model's `architecture` up here (docs/architecture.md,
// "The architecture seam"). GraphCast is built in; register_architecture()
// adds others.
#include <algorithm>
#include <mutex>
#include <optional>
#include <shared_mutex>

#include <fmt/format.h>

#include "actmem/cost/cost_graph.h"
#include "actmem/cost/memory_rules.h"
#include "actmem/model/model.h"
#include "actmem/model/run_options.h"
#include "actmem/util/error.h"
#include "builders.h"

namespace actmem {
namespace {

// Read by every graph build, written only by register_architecture().
class Registry {
 public:
  Registry() : architectures_{{"graphcast", {}, build_graphcast, graphcast_parameter_count}} {}

  std::vector<std::string> names() const {
    std::shared_lock lock(mutex_);
    std::vector<std::string> names;
    for (const Architecture& a : architectures_) names.push_back(a.name);
    return names;
  }

  // A copy, so that the caller runs the builder outside the lock.
  std::optional<Architecture> find(std::string_view name) const {
    std::shared_lock lock(mutex_);
    const auto found = std::find_if(architectures_.begin(), architectures_.end(),
                                    [&](const Architecture& a) { return a.name == name; });
    if (found == architectures_.end()) return std::nullopt;
    return *found;
  }

  void add(Architecture architecture) {
    check(architecture);
    std::unique_lock lock(mutex_);
    for (const Architecture& a : architectures_)
      if (a.name == architecture.name)
        throw InputError::argument("architecture", fmt::format("\"{}\" is already an architecture", a.name));
    architectures_.push_back(std::move(architecture));
  }

 private:
  static void check(const Architecture& a) {
    auto fail = [&](const std::string& what) {
      throw InputError::argument("architecture", fmt::format("\"{}\": {}", a.name, what));
    };
    if (a.name.empty()) fail("expected a name");
    if (a.build == nullptr || a.parameter_count == nullptr) fail("expected a builder and a parameter count");
    const std::vector<std::string> shared = shared_model_fields();
    for (std::size_t i = 0; i < a.fields.size(); ++i) {
      const std::string& key = a.fields[i].key;
      if (key.empty() || a.fields[i].max < 1) fail("expected each field to have a key and a maximum of at least 1");
      if (std::find(shared.begin(), shared.end(), key) != shared.end())
        fail(fmt::format("field \"{}\" is one every model description shares", key));
      for (std::size_t j = 0; j < i; ++j)
        if (a.fields[j].key == key) fail(fmt::format("field \"{}\" is declared twice", key));
    }
  }

  mutable std::shared_mutex mutex_;
  std::vector<Architecture> architectures_;
};

Registry& registry() {
  static Registry r;
  return r;
}

// The model's architecture, whose fields the model must give exactly, each
// within its range; otherwise an InputError naming the model and the field
// (model_from_json refuses such files earlier, with the file's name).
Architecture architecture_of(const ModelDescription& model) {
  std::optional<Architecture> a = registry().find(model.architecture);
  if (!a)
    throw InputError(model.name, "/architecture",
                     fmt::format("expected one of \"{}\", got \"{}\"", fmt::join(architecture_names(), "\", \""),
                                 model.architecture));
  for (const ArchitectureField& f : a->fields) {
    const auto given = model.architecture_fields.find(f.key);
    if (given == model.architecture_fields.end() || given->second < 1 || given->second > f.max)
      throw InputError(
          model.name, "/" + f.key,
          fmt::format("architecture \"{}\" expects {} from 1 to {} ({})", a->name, f.key, f.max, f.meaning));
  }
  for (const auto& given : model.architecture_fields) {
    const std::string& key = given.first;  // a lambda may not capture a structured binding before C++20's fix
    if (std::none_of(a->fields.begin(), a->fields.end(), [&](const ArchitectureField& f) { return f.key == key; }))
      throw InputError(model.name, "/" + key, fmt::format("not a field of architecture \"{}\"", a->name));
  }
  return *std::move(a);
}

}  // namespace

std::vector<std::string> architecture_names() { return registry().names(); }

std::vector<ArchitectureField> architecture_fields(std::string_view architecture) {
  const std::optional<Architecture> a = registry().find(architecture);
  return a ? a->fields : std::vector<ArchitectureField>{};
}

void register_architecture(Architecture architecture) { registry().add(std::move(architecture)); }

CostGraph CostGraph::build(const ModelDescription& model, const RunOptions& run) {
  validate(run);
  try {
    check_rule_names(run.rules_off, "rules_off");
  } catch (const InputError& e) {
    throw InputError::argument("rules_off", e.message());
  }
  return architecture_of(model).build(model, run);
}

std::int64_t parameter_count(const ModelDescription& model) { return architecture_of(model).parameter_count(model); }

}  // namespace actmem

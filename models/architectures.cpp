// CostGraph::build() and parameter_count(): the model's `architecture`
// selects its builder, one per architecture (docs/architecture.md, "The
// architecture seam").
#include <fmt/format.h>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/model.h"
#include "actmem/model/run_options.h"
#include "actmem/util/error.h"
#include "builders.h"

namespace actmem {
namespace {

struct Architecture {
  const char* name;
  CostGraph (*build)(const ModelDescription&, const RunOptions&);
  // The parameters the builder declares, counted without building the step.
  std::int64_t (*parameter_count)(const ModelDescription&);
};

constexpr Architecture kArchitectures[] = {
    {"graphcast", build_graphcast, graphcast_parameter_count},
};

// The model's architecture; one the table lacks is an InputError listing
// those it has (model_from_json refuses it earlier, with the file's name).
const Architecture& architecture_of(const ModelDescription& model) {
  for (const Architecture& a : kArchitectures)
    if (model.architecture == a.name) return a;
  throw InputError(
      model.name, "/architecture",
      fmt::format("expected one of \"{}\", got \"{}\"", fmt::join(architecture_names(), "\", \""), model.architecture));
}

}  // namespace

std::vector<std::string> architecture_names() {
  std::vector<std::string> names;
  for (const Architecture& a : kArchitectures) names.emplace_back(a.name);
  return names;
}

CostGraph CostGraph::build(const ModelDescription& model, const RunOptions& run) {
  validate(run);
  return architecture_of(model).build(model, run);
}

std::int64_t parameter_count(const ModelDescription& model) { return architecture_of(model).parameter_count(model); }

}  // namespace actmem

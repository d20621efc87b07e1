// CostGraph::build(): the model's `architecture` selects its builder, one
// per architecture (docs/architecture.md, "The architecture seam").
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
};

constexpr Architecture kArchitectures[] = {
    {"graphcast", build_graphcast},
};

}  // namespace

std::vector<std::string> architecture_names() {
  std::vector<std::string> names;
  for (const Architecture& a : kArchitectures) names.emplace_back(a.name);
  return names;
}

CostGraph CostGraph::build(const ModelDescription& model, const RunOptions& run) {
  validate(run);
  for (const Architecture& a : kArchitectures)
    if (model.architecture == a.name) return a.build(model, run);
  throw InputError(
      model.name, "/architecture",
      fmt::format("expected one of \"{}\", got \"{}\"", fmt::join(architecture_names(), "\", \""), model.architecture));
}

}  // namespace actmem

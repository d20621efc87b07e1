#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "actmem/model/model.h"
#include "test_models.h"

namespace actmem::fuzz {

void expect(bool condition, const char* what) {
  if (condition) return;
  std::fprintf(stderr, "fuzz: expectation failed: %s\n", what);
  std::abort();
}

void expect_printable(std::string_view message) {
  expect(!message.empty(), "an error message");
  expect(message.size() <= kMaxMessageBytes, "the message is bounded");
  expect(one_line(message) == message, "the message is one printable line");
}

void expect_clear(const InputError& error) { expect_printable(error.what()); }

const CostGraph& tiny_graph() {
  static const CostGraph graph = [] {
    RunOptions run;
    run.rollout = 2;
    return CostGraph::build(testing::tiny_model(), run);
  }();
  return graph;
}

bool costly_geometry(const nlohmann::json& model) {
  if (!model.is_object()) return false;
  bool counts_missing = false;
  for (const char* key : {"grid_nodes", "mesh_nodes", "grid2mesh_edges", "mesh_edges", "mesh2grid_edges"})
    counts_missing = counts_missing || !model.contains(key);
  const auto number = [&](const char* key, double otherwise) {
    const auto it = model.find(key);
    return it != model.end() && it->is_number() ? it->get<double>() : otherwise;
  };
  return counts_missing && (number("resolution_deg", 90) < 2 || number("mesh_level", 0) > 5);
}

}  // namespace actmem::fuzz

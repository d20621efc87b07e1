#pragma once
// Small models for tests: sizes chosen so every tensor is distinct and
// hand-checkable.

#include <nlohmann/json.hpp>

#include "actmem/model/model.h"

namespace actmem::testing {

inline nlohmann::json tiny_model_json(std::int64_t processor_steps = 4) {
  return nlohmann::json{{"name", "tiny"},
                        {"architecture", "graphcast"},
                        {"grid_nodes", 2000},
                        {"mesh_nodes", 500},
                        {"grid2mesh_edges", 3000},
                        {"mesh_edges", 3000},
                        {"mesh2grid_edges", 6000},
                        {"latent_size", 64},
                        {"mlp_hidden_layers", 1},
                        {"processor_steps", processor_steps},
                        {"grid_input_features", 20},
                        {"mesh_input_features", 20},
                        {"edge_features", 4},
                        {"output_features", 10}};
}

inline ModelDescription tiny_model(std::int64_t processor_steps = 4) {
  return model_from_json(tiny_model_json(processor_steps), "tiny.json");
}

// The tiny model in another implementation (model.h).
inline ModelDescription tiny_model(std::int64_t processor_steps, Implementation implementation,
                                   bool concat_trick = false) {
  nlohmann::json j = tiny_model_json(processor_steps);
  j["implementation"] = to_string(implementation);
  j["concat_trick"] = concat_trick;
  return model_from_json(j, "tiny.json");
}

// Every op sequence actmem builds: each implementation, and PhysicsNeMo's
// with its concat_trick.
struct ImplementationCase {
  const char* name;
  Implementation implementation;
  bool concat_trick;
};
inline constexpr ImplementationCase kImplementationCases[] = {
    {"deepmind", Implementation::deepmind, false},
    {"physicsnemo", Implementation::physicsnemo, false},
    {"physicsnemo concat_trick", Implementation::physicsnemo, true},
    {"anemoi", Implementation::anemoi, false},
};

inline ModelDescription tiny_model(std::int64_t processor_steps, const ImplementationCase& c) {
  return tiny_model(processor_steps, c.implementation, c.concat_trick);
}

}  // namespace actmem::testing

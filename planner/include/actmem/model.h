#pragma once
// The model description: what network is trained, on which graph.
//
// It comes from a built-in preset ("graphcast", "graphcast-small",
// "graphcast-operational"; their JSON lives in models/presets/) or a JSON
// file with the fields below. A file gives explicit counts, or geometry
// (resolution_deg + mesh_level) from which the missing counts are computed;
// explicit counts win. Everything is validated on load: a missing field, a
// wrong type, a non-positive count, or sizes whose byte totals could overflow
// 64-bit arithmetic is an InputError naming the file and the field.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace actmem {

struct ModelDescription {
  std::string name;
  std::string architecture = "graphcast";  // encoder–processor–decoder GNN

  // Geometry the counts were (or may be) computed from.
  std::optional<double> resolution_deg;
  std::optional<std::int64_t> mesh_level;
  std::optional<double> radius_query_fraction;  // grid2mesh radius / longest finest-mesh edge

  // Node and directed edge counts.
  std::int64_t grid_nodes = 0;
  std::int64_t mesh_nodes = 0;
  std::int64_t grid2mesh_edges = 0;
  std::int64_t mesh_edges = 0;
  std::int64_t mesh2grid_edges = 0;

  // Widths and depth.
  std::int64_t latent_size = 0;
  std::int64_t mlp_hidden_layers = 0;
  std::int64_t processor_steps = 0;
  std::int64_t grid_input_features = 0;
  std::int64_t mesh_input_features = 0;
  std::int64_t edge_features = 0;
  std::int64_t output_features = 0;
};

// Names of the built-in presets, in catalog order.
std::vector<std::string> preset_names();

// A preset by name, or else a JSON file by path. An unknown name that is not
// a file suggests the closest preset.
ModelDescription load_model(std::string_view preset_or_path);

// Parses and validates a description; `source` names it in errors.
ModelDescription model_from_json(const nlohmann::json& document, const std::string& source);

// The description as JSON (the same fields, explicit counts included).
nlohmann::json to_json(const ModelDescription& model);

// A stable hex digest of every field that affects cost (counts, widths,
// depth; not the name). Plans carry it to refuse being applied to another model.
std::string fingerprint(const ModelDescription& model);

// Trainable parameters, counted from the layer structure (docs/model-format.md),
// including the decoder's mesh-node MLP whose output the code discards.
std::int64_t parameter_count(const ModelDescription& model);

}  // namespace actmem

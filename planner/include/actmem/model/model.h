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
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace actmem {

// Whose code trains the network: the op sequence of one training step
// differs between implementations of the same architecture in ways that
// change what is kept for the backward pass (docs/cost-model.md §1, the
// implementation rows; docs/validation-trainers.md measures each).
//   deepmind     DeepMind's graphcast code, as integrations/pytorch and
//                integrations/jax write it: the default, the only one before
//                implementations were told apart.
//   physicsnemo  NVIDIA PhysicsNeMo's GraphCastNet: PyG scatter aggregation,
//                the processor's edge residual before it aggregates, no
//                unused decoder mesh-node MLP; optionally its concat_trick.
//   anemoi       ECMWF anemoi's GNN encoder, processor and decoder: PyG
//                scatter aggregation, an edge residual in every message
//                passing, and the encoder's grid nodes updated by the shared
//                node MLP on cat([x, x]).
enum class Implementation { deepmind, physicsnemo, anemoi };

std::string to_string(Implementation implementation);

struct ModelDescription {
  std::string name;
  std::string architecture = "graphcast";  // encoder–processor–decoder GNN
  Implementation implementation = Implementation::deepmind;
  // PhysicsNeMo's do_concat_trick (implementation physicsnemo only): each
  // edge MLP's first linear split per input, the node parts projected before
  // they are gathered, the three summed per edge; no [E, 3L] concatenation.
  bool concat_trick = false;

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

  // The fields the model's architecture adds to the shared ones above, by
  // key (its ArchitectureField declarations; GraphCast adds none).
  std::map<std::string, std::int64_t> architecture_fields;
};

// A field that an architecture's model descriptions carry beside the shared
// ones: a required integer from 1 to `max`. Since each may scale the
// architecture's tensors, it multiplies the bound that keeps a training
// step's byte totals within 64 bits.
struct ArchitectureField {
  std::string key;
  std::int64_t max = 1;
  std::string meaning;  // one line, for error messages and docs
};

// The architectures CostGraph::build has a builder for: the values a model's
// `architecture` may take (the built-in ones, then those added by
// register_architecture(), cost_graph.h).
std::vector<std::string> architecture_names();

// The fields an architecture adds to the shared ones; none for a name that
// is not an architecture.
std::vector<ArchitectureField> architecture_fields(std::string_view architecture);

// The fields every model description may give, whatever its architecture
// (docs/model-format.md).
std::vector<std::string> shared_model_fields();

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
// depth; the implementation and concat_trick where they are not the
// defaults and the architecture where it is not GraphCast, with its fields,
// so that digests made before these existed still hold; not the name).
// Plans carry it to refuse being applied to another model.
std::string fingerprint(const ModelDescription& model);

// The latitude–longitude grid of the description's `resolution_deg`
// (latitudes, longitudes; docs/geometry.md) when it is a grid resolution and
// that grid has `grid_nodes` points; nullopt otherwise (no resolution given,
// or explicit counts of another grid). Under JAX such a model's targets are
// one array per variable over this grid (docs/journal.md J26).
std::optional<std::pair<std::int64_t, std::int64_t>> lat_lon_shape(const ModelDescription& model);

// Trainable parameters: those the builder of the model's architecture
// declares (models/architectures.cpp picks it, as CostGraph::build does),
// counted without building the training step, so equal to
// CostGraph::parameter_count() of every graph built for the model, whatever
// the RunOptions. For GraphCast they follow the layer structure of the
// model's implementation (docs/model-format.md, docs/cost-model.md §1):
// DeepMind's includes the decoder's mesh-node MLP whose output its code
// discards; anemoi's encoder shares one node MLP between mesh and grid
// nodes. An architecture without a builder is an InputError.
std::int64_t parameter_count(const ModelDescription& model);

}  // namespace actmem

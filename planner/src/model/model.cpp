#include "actmem/model/model.h"

#include <algorithm>
#include <array>
#include <filesystem>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/geometry/graph_counts.h"
#include "actmem/geometry/icosahedral_mesh.h"
#include "actmem/geometry/lat_lon_grid.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/suggest.h"
#include "util/checked_math.h"
#include "util/embedded.h"
#include "util/json_fields.h"

namespace actmem {
namespace {

const std::vector<std::string> kPresets{"graphcast", "graphcast-small", "graphcast-operational"};

const std::vector<std::string> kFields{"name",
                                       "description",
                                       "architecture",
                                       "implementation",
                                       "concat_trick",
                                       "resolution_deg",
                                       "mesh_level",
                                       "radius_query_fraction",
                                       "grid_nodes",
                                       "mesh_nodes",
                                       "grid2mesh_edges",
                                       "mesh_edges",
                                       "mesh2grid_edges",
                                       "latent_size",
                                       "mlp_hidden_layers",
                                       "processor_steps",
                                       "grid_input_features",
                                       "mesh_input_features",
                                       "edge_features",
                                       "output_features",
                                       "fingerprint",
                                       "parameter_count"};

constexpr std::array<Implementation, 3> kImplementations{Implementation::deepmind, Implementation::physicsnemo,
                                                         Implementation::anemoi};

// `implementation` (default deepmind) and `concat_trick` (default false,
// PhysicsNeMo's knob: only with implementation physicsnemo).
void read_implementation(const detail::FieldReader& in, ModelDescription& m) {
  if (in.has("implementation")) {
    const std::string text = in.string("implementation");
    std::vector<std::string> names;
    for (Implementation i : kImplementations) names.push_back(to_string(i));
    const auto found = std::find(names.begin(), names.end(), text);
    if (found == names.end())
      in.fail("implementation", fmt::format("expected one of \"{}\", got {}{}", fmt::join(names, "\", \""),
                                            detail::describe(in.value("implementation")), did_you_mean(text, names)));
    m.implementation = kImplementations[static_cast<std::size_t>(found - names.begin())];
  }
  m.concat_trick = in.has("concat_trick") && in.boolean("concat_trick");
  if (m.concat_trick && m.implementation != Implementation::physicsnemo)
    in.fail("concat_trick", fmt::format("concat_trick is PhysicsNeMo's knob: expected implementation \"physicsnemo\" "
                                        "with it, got \"{}\"",
                                        to_string(m.implementation)));
}

struct CountField {
  const char* key;
  std::int64_t ModelDescription::*member;
  std::int64_t GraphCounts::*computed;
};

constexpr std::array<CountField, 5> kCountFields{{
    {"grid_nodes", &ModelDescription::grid_nodes, &GraphCounts::grid_nodes},
    {"mesh_nodes", &ModelDescription::mesh_nodes, &GraphCounts::mesh_nodes},
    {"grid2mesh_edges", &ModelDescription::grid2mesh_edges, &GraphCounts::grid2mesh_edges},
    {"mesh_edges", &ModelDescription::mesh_edges, &GraphCounts::mesh_edges},
    {"mesh2grid_edges", &ModelDescription::mesh2grid_edges, &GraphCounts::mesh2grid_edges},
}};

// Rejects sizes whose activation byte totals could overflow int64: an upper
// bound on one training step's bytes (every node and edge set at the widest
// tensor, float64, for every op of every stage) must stay below 2^62.
void check_byte_totals(const ModelDescription& m, const std::string& source) {
  using detail::checked_add;
  using detail::checked_mul;
  const std::int64_t widest =
      std::max({3 * m.latent_size, m.grid_input_features, m.mesh_input_features, m.output_features, m.edge_features});
  std::optional<std::int64_t> elements = 0;
  for (const CountField& f : kCountFields) elements = elements ? checked_add(*elements, m.*(f.member)) : std::nullopt;
  std::optional<std::int64_t> bound = elements;
  for (std::int64_t factor :
       {widest, std::int64_t{8}, m.mlp_hidden_layers + 8, m.processor_steps + 4, std::int64_t{16}})
    bound = bound ? checked_mul(*bound, factor) : std::nullopt;
  for (const auto& field : m.architecture_fields) bound = bound ? checked_mul(*bound, field.second) : std::nullopt;
  if (!bound || *bound > detail::kMaxTotalBytes) {
    const CountField* largest = &kCountFields[0];
    for (const CountField& f : kCountFields)
      if (m.*(f.member) > m.*(largest->member)) largest = &f;
    throw InputError(source, std::string{"/"} + largest->key,
                     fmt::format("sizes too large: byte totals of a training step would overflow 64-bit arithmetic "
                                 "({} = {}, latent_size = {})",
                                 largest->key, m.*(largest->member), m.latent_size));
  }
}

// The counts missing from the file, computed from its geometry; each must
// be at least 1 (a tiny radius fraction can leave grid2mesh empty).
void compute_missing_counts(const detail::FieldReader& in, ModelDescription& m) {
  for (const CountField& f : kCountFields) {
    if (in.has(f.key)) continue;
    if (!m.resolution_deg || !m.mesh_level)
      in.fail(f.key, "missing required field (give it, or give resolution_deg and mesh_level to compute it)");
  }
  GeometrySpec spec;
  spec.resolution_deg = *m.resolution_deg;
  spec.mesh_level = static_cast<int>(*m.mesh_level);
  spec.radius_query_fraction = m.radius_query_fraction.value_or(spec.radius_query_fraction);
  GraphCounts counts;
  try {
    counts = compute_graph_counts(spec);
  } catch (const InputError& e) {
    // The geometry's arguments are the model file's fields of the same names.
    throw InputError(in.source(), "/" + e.source(), e.message());
  }
  for (const CountField& f : kCountFields) {
    if (in.has(f.key)) continue;
    if (counts.*(f.computed) < 1)
      in.fail(f.key, fmt::format("computed as {} from the geometry; expected at least 1 (give it, or a larger "
                                 "radius_query_fraction)",
                                 counts.*(f.computed)));
    m.*(f.member) = counts.*(f.computed);
  }
}

// Fields derived from the others (actmem writes them: plan documents, the
// Python module's model()) must match the model they describe. The
// parameter count is the architecture's builder's (parameter_count(),
// defined with the builders in models/architectures.cpp), counted only
// when the file gives one.
void check_derived_fields(const detail::FieldReader& in, const ModelDescription& m) {
  if (in.has("fingerprint") && in.string("fingerprint") != fingerprint(m))
    in.fail("fingerprint", fmt::format("expected {} for the model described here, got {} (was the document edited?)",
                                       fingerprint(m), detail::describe(in.value("fingerprint"))));
  if (!in.has("parameter_count")) return;
  const std::int64_t given = in.positive_int("parameter_count", std::numeric_limits<std::int64_t>::max());
  if (const std::int64_t expected = parameter_count(m); given != expected)
    in.fail("parameter_count", fmt::format("expected {} for the model described here, got {}", expected,
                                           detail::describe(in.value("parameter_count"))));
}

}  // namespace

std::string to_string(Implementation implementation) {
  switch (implementation) {
    case Implementation::deepmind: return "deepmind";
    case Implementation::physicsnemo: return "physicsnemo";
    case Implementation::anemoi: return "anemoi";
  }
  return "unknown";
}

std::vector<std::string> preset_names() { return kPresets; }

std::vector<std::string> shared_model_fields() { return kFields; }

ModelDescription model_from_json(const nlohmann::json& document, const std::string& source) {
  const detail::FieldReader in(document, source);
  const std::vector<ArchitectureField> own = architecture_fields(
      in.has("architecture") && in.value("architecture").is_string() ? in.string("architecture") : std::string{});
  std::vector<std::string> known = kFields;
  for (const ArchitectureField& f : own) known.push_back(f.key);
  in.reject_unknown_fields(known);

  ModelDescription m;
  m.name = in.optional_name("name").value_or(one_line(std::filesystem::path(source).stem().string()));
  in.optional_string("description");  // free text for people, read by none of actmem's code
  m.architecture = in.string("architecture");
  if (const std::vector<std::string> names = architecture_names();
      std::find(names.begin(), names.end(), m.architecture) == names.end())
    in.fail("architecture",
            fmt::format("expected one of \"{}\", got {}{}", fmt::join(names, "\", \""),
                        detail::describe(in.value("architecture")), did_you_mean(m.architecture, names)));
  read_implementation(in, m);
  for (const ArchitectureField& f : own) m.architecture_fields[f.key] = in.positive_int(f.key, f.max);
  m.resolution_deg = in.optional_positive_number("resolution_deg");
  if (in.has("mesh_level")) m.mesh_level = in.non_negative_int("mesh_level", kMaxMeshLevel);
  m.radius_query_fraction = in.optional_positive_number("radius_query_fraction");

  m.latent_size = in.positive_int("latent_size", kMaxWidth);
  m.mlp_hidden_layers = in.positive_int("mlp_hidden_layers", kMaxHiddenLayers);
  m.processor_steps = in.positive_int("processor_steps", kMaxProcessorSteps);
  m.grid_input_features = in.positive_int("grid_input_features", kMaxWidth);
  m.mesh_input_features = in.positive_int("mesh_input_features", kMaxWidth);
  m.edge_features = in.positive_int("edge_features", kMaxWidth);
  m.output_features = in.positive_int("output_features", kMaxWidth);

  // Explicit counts win; missing ones come from the geometry, if given.
  bool needs_geometry = false;
  for (const CountField& f : kCountFields) {
    if (in.has(f.key))
      m.*(f.member) = in.positive_int(f.key, kMaxCount);
    else
      needs_geometry = true;
  }
  if (needs_geometry) compute_missing_counts(in, m);
  check_byte_totals(m, source);
  check_derived_fields(in, m);
  return m;
}

ModelDescription load_model(std::string_view preset_or_path) {
  const std::string name{preset_or_path};
  if (std::find(kPresets.begin(), kPresets.end(), name) != kPresets.end()) {
    const auto text = detail::embedded_file(name + ".json");
    if (!text) throw std::logic_error("preset " + name + " is not embedded");
    return model_from_json(detail::parse_json(*text, name), name);
  }
  if (!detail::names_regular_file(name))
    throw InputError::argument("model", fmt::format("'{}' is neither a preset ({}) nor a readable file{}", name,
                                                    fmt::join(kPresets, ", "), did_you_mean(name, kPresets)));
  return model_from_json(detail::read_json_file(name), name);
}

nlohmann::json to_json(const ModelDescription& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["architecture"] = m.architecture;
  // Written only where not the default: descriptions of DeepMind's
  // GraphCast read as they did before implementations were told apart.
  if (m.implementation != Implementation::deepmind) j["implementation"] = to_string(m.implementation);
  if (m.concat_trick) j["concat_trick"] = true;
  if (m.resolution_deg) j["resolution_deg"] = *m.resolution_deg;
  if (m.mesh_level) j["mesh_level"] = *m.mesh_level;
  if (m.radius_query_fraction) j["radius_query_fraction"] = *m.radius_query_fraction;
  for (const CountField& f : kCountFields) j[f.key] = m.*(f.member);
  j["latent_size"] = m.latent_size;
  j["mlp_hidden_layers"] = m.mlp_hidden_layers;
  j["processor_steps"] = m.processor_steps;
  j["grid_input_features"] = m.grid_input_features;
  j["mesh_input_features"] = m.mesh_input_features;
  j["edge_features"] = m.edge_features;
  j["output_features"] = m.output_features;
  for (const auto& [key, value] : m.architecture_fields) j[key] = value;
  return j;
}

std::optional<std::pair<std::int64_t, std::int64_t>> lat_lon_shape(const ModelDescription& model) {
  if (!model.resolution_deg || !resolution_problem(*model.resolution_deg).empty()) return std::nullopt;
  const LatLonGrid grid(*model.resolution_deg);
  if (grid.size() != model.grid_nodes) return std::nullopt;
  return std::pair<std::int64_t, std::int64_t>{grid.latitude_count(), grid.longitude_count()};
}

std::string fingerprint(const ModelDescription& m) {
  // FNV-1a over the cost-relevant fields in a fixed order.
  std::uint64_t hash = 14695981039346656037ull;
  auto mix = [&hash](std::int64_t value) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= static_cast<std::uint64_t>(value >> (8 * byte)) & 0xffu;
      hash *= 1099511628211ull;
    }
  };
  for (const CountField& f : kCountFields) mix(m.*(f.member));
  for (std::int64_t v : {m.latent_size, m.mlp_hidden_layers, m.processor_steps, m.grid_input_features,
                         m.mesh_input_features, m.edge_features, m.output_features})
    mix(v);
  // Only where not the default, so that every digest made before the field
  // existed (DeepMind's GraphCast) still holds.
  if (m.implementation != Implementation::deepmind) mix(static_cast<std::int64_t>(m.implementation));
  if (m.concat_trick) mix(-1);
  auto mix_text = [&mix](const std::string& text) {  // length first: no two sequences of texts mix alike
    mix(static_cast<std::int64_t>(text.size()));
    for (char c : text) mix(static_cast<unsigned char>(c));
  };
  if (m.architecture != "graphcast") mix_text(m.architecture);
  for (const auto& [key, value] : m.architecture_fields) {  // none for GraphCast
    mix_text(key);
    mix(value);
  }
  return fmt::format("{:016x}", hash);
}

}  // namespace actmem

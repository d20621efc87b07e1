// parameter_count(), declared in actmem/model/model.h.
#include "actmem/model/model.h"

namespace actmem {
namespace {

// An MLP as GraphCast builds it: Linear(in→L), then (hidden_layers − 1) ×
// Linear(L→L), then Linear(L→out), each with a bias; optionally a LayerNorm
// (scale and offset) on the output.
std::int64_t mlp_parameters(std::int64_t in, std::int64_t latent, std::int64_t out, std::int64_t hidden_layers,
                            bool layer_norm) {
  std::int64_t n = in * latent + latent;
  n += (hidden_layers - 1) * (latent * latent + latent);
  n += latent * out + out;
  if (layer_norm) n += 2 * out;
  return n;
}

}  // namespace

std::int64_t parameter_count(const ModelDescription& m) {
  const std::int64_t L = m.latent_size;
  auto mlp = [&](std::int64_t in) { return mlp_parameters(in, L, L, m.mlp_hidden_layers, true); };
  // anemoi's forward mapper updates its grid nodes with the mesh nodes' MLP
  // (node_mlp on cat([x, x])): no grid-node MLP of its own.
  const std::int64_t grid_node_mlp = m.implementation == Implementation::anemoi ? 0 : mlp(L);
  const std::int64_t encoder = mlp(m.grid_input_features) + mlp(m.mesh_input_features) + mlp(m.edge_features) +
                               mlp(3 * L) /* edges */ + mlp(2 * L) /* mesh nodes */ + grid_node_mlp;
  const std::int64_t mesh_edge_embed = mlp(m.edge_features);
  const std::int64_t processor = m.processor_steps * (mlp(3 * L) + mlp(2 * L));
  // DeepMind's decoder builds a mesh-node MLP that receives no edges (input
  // L) and whose output it discards; its parameters exist all the same.
  const std::int64_t unused_mesh_mlp = m.implementation == Implementation::deepmind ? mlp(L) : 0;
  const std::int64_t decoder = mlp(m.edge_features) + mlp(3 * L) + mlp(2 * L) + unused_mesh_mlp +
                               mlp_parameters(L, L, m.output_features, m.mlp_hidden_layers, false);
  return encoder + mesh_edge_embed + processor + decoder;
}

}  // namespace actmem

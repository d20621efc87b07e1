#pragma once
// Each trainer's memory knobs as the plans they make actmem simulate
// (docs/trainer-exports.md). A trainer's candidates are every setting of its
// knobs that actmem costs; each candidate holds the keys in the nesting the
// trainer reads them and the plan the trainer will really run with them.
// The plan, never a wish: a setting the trainer cannot express is not a
// candidate.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actmem/cost/cost_graph.h"
#include "actmem/simulate/plan.h"

namespace actmem::detail {

struct KnobSetting {
  nlohmann::json config;  // the trainer's keys, nested as its config reads them
  Plan plan;              // what the trainer runs with them, as actmem simulates it
};

// Stage indices of the chain encoder, mesh_edge_embed, processor.0 …
// processor.{K-1}, decoder.
inline int processor_steps(const CostGraph& g) { return static_cast<int>(g.model().processor_steps); }
inline int mesh_edge_embed_stage() { return 1; }
inline int first_processor_stage() { return 2; }
inline int decoder_stage(const CostGraph& g) { return static_cast<int>(g.stages().size()) - 1; }

// NVIDIA PhysicsNeMo's GraphCastNet as examples/weather/graphcast/train_graphcast.py
// sets it up: the one-step keys for rollout 1, and for rollout > 1 the keys
// that give the fine-tuning phase the setting on one GPU and under DDP alike.
std::vector<KnobSetting> physicsnemo_settings(const CostGraph& g);

// ECMWF anemoi's AnemoiModelEncProcDec with model=gnn (GNN mappers and
// processor): per-component gradient_checkpointing and processor num_chunks.
std::vector<KnobSetting> anemoi_settings(const CostGraph& g);

// DeepMind GraphCast's one knob: autoregressive.Predictor(gradient_checkpointing=…).
std::vector<KnobSetting> deepmind_graphcast_settings(const CostGraph& g);

// DeepMind's DeepGNN (WeatherNext 2) used for the grid-to-mesh, mesh and
// mesh-to-grid GNNs: per-GNN remat flags, remat_block_size and
// edge_update_remat_block_size.
std::vector<KnobSetting> deep_gnn_settings(const CostGraph& g, const std::vector<std::int64_t>& edges);

// The edges per block DeepMind's typed_graph_net uses for `blocks` blocks of
// `edges` edges (it splits at multiples of the block size, the last block the
// smaller), or 0 when no block size gives exactly `blocks` blocks whose
// largest is the largest of actmem's equal blocks.
std::int64_t deepmind_edge_block_size(std::int64_t edges, std::int64_t blocks);

// Pasteable text of a config: YAML (nested mappings) or Python assignments.
std::string yaml_snippet(const nlohmann::json& config);
std::string python_snippet(const nlohmann::json& config);
// One JSON value as a Python literal (None, True, dict(key=value, …)).
std::string python_literal(const nlohmann::json& value);

}  // namespace actmem::detail

#pragma once
// A plan: which stages run under checkpoints and how edge updates are blocked
// (docs/plan-format.md). Stages are referred to by index into the stage chain
// (CostGraph::chain()); names appear only in JSON. What a plan may do with a
// stage (its role, whether it has an edge update to block) is what the
// architecture's builder declares in the chain; no rule here reads a name.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "actmem/cost/cost_graph.h"

namespace actmem {

// Stages from..to (inclusive) run under one checkpoint: only the region's
// inputs are kept after the forward pass, and the region is recomputed in
// the backward pass. `inner` regions nest inside, sorted, non-overlapping.
struct Region {
  int from = 0;
  int to = 0;
  std::vector<Region> inner;
  friend bool operator==(const Region&, const Region&) = default;
};

struct Plan {
  std::vector<Region> checkpoints;        // sorted, non-overlapping
  std::vector<std::int64_t> edge_blocks;  // per stage; 1 = not blocked
  // Each rollout step (input assembly, network, loss, next input) runs
  // under one checkpoint around the regions above: DeepMind's
  // autoregressive.Predictor(gradient_checkpointing=True). Only the step's
  // inputs are kept; the step is recomputed in the backward pass. Like
  // DeepMind's predictor, it does nothing at rollout 1.
  bool step_checkpoint = false;
  // With step_checkpoint, where the rollout is XLA's scanned loop (JAX):
  // what the rollout keeps per step lives in the host's memory, not the
  // device's. Each step checkpoint's kept input (the carried frames) is
  // offloaded as the forward loop makes it and brought back as its step's
  // backward starts (jax.checkpoint's save_and_offload_only_these_names,
  // offload_dst "pinned_host"), and the rollout's targets are an argument
  // in host memory, each step moving its own to the device. Transfers are
  // not timed. Like step_checkpoint, it does nothing at rollout 1.
  bool host_offload = false;
  friend bool operator==(const Plan&, const Plan&) = default;
};

// The plan with no checkpoints and no blocking.
Plan empty_plan(const std::vector<std::string>& stages);

// Parses "checkpoints" and "edge_blocks" of a plan document and validates
// them against the stage chain: unknown stages, blocks for a stage without
// an edge update, reversed or overlapping
// regions, inner regions outside their parent, regions nested deeper than
// kMaxRegionDepth, and block counts that are not within
// 1..min(edges, kMaxEdgeBlocks) are InputErrors naming `source` and the
// JSON pointer.
Plan plan_from_json(const nlohmann::json& document, std::span<const Stage> chain, const std::string& source);
// What `plan` asks of the run it is simulated for: host_offload only where
// the rollout is XLA's scanned loop (JAX). InputError(source,
// "/host_offload", …) otherwise; simulate() checks it with source "plan".
void validate_for_run(const Plan& plan, const CostGraph& graph, const std::string& source);

// Checks a plan made in code as plan_from_json checks a document: one
// block count per stage, each from 1 to min(edges, kMaxEdgeBlocks) (1 for
// stages without an edge update); regions sorted, within the chain, not
// overlapping, inner ones within their parent, nested at most
// kMaxRegionDepth levels (actmem/util/limits.h); host_offload only with
// step_checkpoint. Throws InputError("plan", …).
// simulate() checks every plan it is given.
void validate(const Plan& plan, std::span<const Stage> chain);

// The plan as in a plan file: {"checkpoints": [...], "edge_blocks": {...}}
// with stage names, and "step_checkpoint": true and "host_offload": true
// when set.
nlohmann::json plan_to_json(const Plan& plan, const std::vector<std::string>& stages);
nlohmann::json checkpoints_to_json(const std::vector<Region>& regions, const std::vector<std::string>& stages);

// The chain for people, runs of consecutive stages of one role as
// "first..last": "encoder, mesh_edge_embed, processor.0..processor.15,
// decoder"; only the stages with an edge update when `edge_updates_only`.
std::string describe_chain(std::span<const Stage> chain, bool edge_updates_only = false);

// One line for people: "encoder, decoder, processor.0–2 | blocks encoder×8".
std::string describe(const Plan& plan, const std::vector<std::string>& stages);

}  // namespace actmem

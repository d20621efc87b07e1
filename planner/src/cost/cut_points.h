#pragma once
// Checkpointable cut points of a cost graph's op order, found from the DAG
// (CostGraph::lifetimes(), which Boost.Graph's edges give).
//
// Boundary i of a graph of n ops (0 <= i <= n) is the position between op
// i - 1 and op i of ops(). The activations crossing it are those made
// before it and read at or after it: role activation and lifetime.producer
// < i <= lifetime.last_use (inputs and parameters are live throughout and
// never cross; a tensor nothing reads crosses nothing). Its width is their
// count: all that ties what came before to what follows, and all that a
// checkpoint starting there could have to keep.
//
// Cut points: the inner boundaries (1 <= i < n) on a local-minimum plateau
// of the width. A plateau is a maximal run of consecutive inner boundaries
// of equal width; it is a local minimum when the inner boundary just before
// it (if any) and the one just after it (if any) are both wider. So in a
// chain every boundary is a cut, and in a chain with a skip (a→b→c with
// a→c) the boundaries the skip spans are wider than its ends, so none of
// them is a cut, however long the skip.
//
// On GraphCast (docs/architecture.md "Boost.Graph at work") every stage
// boundary is a cut point except two kinds, which check_stage_boundaries()
// accepts for the reasons given there; the chain derived from the cut points
// is finer than the builder's (the encoder's embeddings and MLP chains hold
// cuts of their own).

#include <span>
#include <vector>

#include "actmem/cost/cost_graph.h"

namespace actmem::detail {

// Widths of boundaries 0..n (n + 1 entries; boundaries 0 and n are 0).
std::vector<int> crossing_widths(const CostGraph& graph);

// The activations crossing boundary `boundary`, by id.
std::vector<TensorId> crossing_set(const CostGraph& graph, int boundary);

// The cut points, ascending.
std::vector<int> cut_points(const CostGraph& graph);

// The builder's stage boundaries: inner boundaries where the (step, stage)
// of the ops changes, ascending.
std::vector<int> stage_boundaries(const CostGraph& graph);

// A chain of stages from cut points: per op, the index of its segment,
// segments split at each of `cuts` (ascending inner boundaries of
// `op_count` ops). What a builder without stage tags would get.
std::vector<int> chain_from_cut_points(std::size_t op_count, std::span<const int> cuts);

// Every stage boundary is a cut point, or of a kind the cut-point
// definition cannot see (cut_points.cpp); a std::logic_error names the first
// that is neither. CostGraphBuilder::finish() runs it.
void check_stage_boundaries(const CostGraph& graph);

}  // namespace actmem::detail

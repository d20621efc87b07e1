#pragma once
// The architectures' builders, one per architecture; CostGraph::build()
// (models/architectures.cpp) picks one by ModelDescription::architecture.
// Each emits its op DAG and declares its stage chain through
// CostGraphBuilder (docs/architecture.md, "The architecture seam").

#include "actmem/cost/cost_graph.h"

namespace actmem {

// GraphCast's training step (models/graphcast_builder.cpp).
CostGraph build_graphcast(const ModelDescription& model, const RunOptions& run);

}  // namespace actmem

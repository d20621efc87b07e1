#pragma once
// The architectures' builders, one per architecture; CostGraph::build()
// (models/architectures.cpp) picks one by ModelDescription::architecture.
// Each emits its op DAG and declares its stage chain and its parameters
// through CostGraphBuilder (docs/architecture.md, "The architecture seam"),
// and counts those parameters on their own for parameter_count() (model.h).

#include "actmem/cost/cost_graph.h"

namespace actmem {

// GraphCast's training step (models/graphcast_builder.cpp).
CostGraph build_graphcast(const ModelDescription& model, const RunOptions& run);
// The parameters that builder declares, without building the step: the
// model's parameter_count() (model.h), equal to CostGraph::parameter_count()
// of every graph build_graphcast() makes for the model.
std::int64_t graphcast_parameter_count(const ModelDescription& model);

}  // namespace actmem

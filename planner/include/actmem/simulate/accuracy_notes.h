#pragma once
// What was measured about how far a prediction may be from the framework's
// own figure, where that is outside the usual accuracy (docs/validation.md,
// docs/validation-jax.md): a JAX profile read on a GPU, a JAX rollout whose
// steps are not checkpointed. Each note is one sentence that names the
// measurement it rests on; `simulate` prints them after "note: " and every
// JSON report carries them as `notes`.

#include <string>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"

namespace actmem {

// The notes for simulating `plan` on `graph` and `device`; empty where the
// run is of a kind validated within 5% of the framework's figure.
std::vector<std::string> accuracy_notes(const CostGraph& graph, const Device& device, const Plan& plan);

}  // namespace actmem

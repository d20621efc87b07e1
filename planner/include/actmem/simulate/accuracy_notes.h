#pragma once
// What was measured about how far a prediction may be from the framework's
// own figure, for the kinds of run validated apart from the rest
// (docs/validation-jax.md): a JAX profile read for a GPU (measured off by
// more than 5%), a JAX rollout whose steps are not checkpointed (fewer
// cases, and XLA's choice of order read from them, docs/journal.md J16).
// Each note is one sentence that names the measurement it rests on;
// `simulate` prints them after "note: " and every JSON report carries them
// as `notes`.

#include <string>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"

namespace actmem {

// The notes for simulating `plan` on `graph` and `device`; empty for the
// kinds validated with the rest (PyTorch, docs/validation.md; JAX on a TPU
// at rollout 1 or with each step checkpointed).
std::vector<std::string> accuracy_notes(const CostGraph& graph, const Device& device, const Plan& plan);

}  // namespace actmem

#pragma once
// Which of its three orders XLA's default module scheduler keeps for a JAX
// training step (docs/journal.md J16, J52). XLA schedules the whole
// module as a list (its greedy list scheduler, whose rules the memory
// machine follows), depth-first and in post-order, and keeps the order its
// heap simulator finds least. Over all 85 `mid` and graphcast-small cases
// read with integrations/jax/schedules.py its choice followed from the
// plan: depth-first for the rollouts without step checkpoints whose
// encoder and decoder (the chain's first and last stages) are both outside
// every checkpoint (15 cases, 9 of them predicted before they were
// compiled), post-order where one of them is (2), the list order for the
// other 68 (one-step and step-checkpointed runs, and rollouts with both
// checkpointed). That is a reading of XLA's choice, not its criterion.

#include "actmem/cost/cost_graph.h"
#include "actmem/simulate/plan.h"

namespace actmem::detail {

enum class XlaModuleOrder { list, depth_first, post_order };

// The order XLA keeps for `plan`'s step of `graph` under JAX.
XlaModuleOrder xla_module_order(const CostGraph& graph, const Plan& plan);

}  // namespace actmem::detail

#include "simulate/xla_module_order.h"

#include <algorithm>
#include <span>

namespace actmem::detail {

namespace {

// How many of the grid-sized roles (encoder, decoder) have a stage outside
// every checkpoint of `plan`: 0, 1 or 2.
int mappers_outside_checkpoints(std::span<const Stage> chain, const Plan& plan) {
  int outside = 0;
  for (StageRole role : {StageRole::encoder, StageRole::decoder}) {
    for (int s = 0; s < static_cast<int>(chain.size()); ++s) {
      if (chain[static_cast<std::size_t>(s)].role != role) continue;
      const bool covered = std::any_of(plan.checkpoints.begin(), plan.checkpoints.end(),
                                       [&](const Region& r) { return r.from <= s && s <= r.to; });
      if (!covered) {
        ++outside;
        break;
      }
    }
  }
  return outside;
}

}  // namespace

XlaModuleOrder xla_module_order(const CostGraph& graph, const Plan& plan) {
  if (graph.run().rollout < 2 || plan.step_checkpoint) return XlaModuleOrder::list;
  switch (mappers_outside_checkpoints(graph.chain(), plan)) {
    case 2: return XlaModuleOrder::depth_first;
    case 1: return XlaModuleOrder::post_order;
    default: return XlaModuleOrder::list;
  }
}

}  // namespace actmem::detail

#include "simulate/xla_module_order.h"

#include <algorithm>
#include <span>

namespace actmem::detail {

namespace {

// How many of the stages at the chain's ends, the first and the last (those
// that map the inputs in and onto the output: GraphCast's encoder and
// decoder, the grid-sized ones), are outside every checkpoint of `plan`:
// 0, 1 or 2.
int ends_outside_checkpoints(std::span<const Stage> chain, const Plan& plan) {
  const int last = static_cast<int>(chain.size()) - 1;
  int outside = 0;
  for (int s : {0, last}) {
    const bool covered = std::any_of(plan.checkpoints.begin(), plan.checkpoints.end(),
                                     [&](const Region& r) { return r.from <= s && s <= r.to; });
    if (!covered) ++outside;
    if (last == 0) break;
  }
  return outside;
}

}  // namespace

XlaModuleOrder xla_module_order(const CostGraph& graph, const Plan& plan) {
  if (graph.run().rollout < 2 || plan.step_checkpoint) return XlaModuleOrder::list;
  switch (ends_outside_checkpoints(graph.chain(), plan)) {
    case 2: return XlaModuleOrder::depth_first;
    case 1: return XlaModuleOrder::post_order;
    default: return XlaModuleOrder::list;
  }
}

}  // namespace actmem::detail

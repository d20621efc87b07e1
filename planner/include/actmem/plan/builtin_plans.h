#pragma once
// Built-in plans: named presets of a plan for a stage chain, placed by the
// roles its architecture's builder declares (DeepMind's plan for GraphCast
// among them). The simulator and the solver take any plan; these are what
// a user can name instead of writing one (`--plan deepmind`).

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/simulate/plan.h"

namespace actmem {

// "none", "full" (every stage its own region), "every:K" (the
// processor-role stages in groups of K, 1 ≤ K ≤ kMaxStagesPerGroup),
// "deepmind" or "deepmind:B" (each encoder- and decoder-role stage one
// region, its edge update in B blocks, default 8, 1 ≤ B ≤ kMaxEdgeBlocks,
// capped by its edge rows; processor stages in regions of 3). Another name
// is an InputError::argument("plan", …) with a "did you mean".
Plan builtin_plan(std::string_view name, std::span<const Stage> chain);
std::vector<std::string> builtin_plan_names();

}  // namespace actmem

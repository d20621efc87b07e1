#pragma once
// The solver's search: a dynamic program over the stage chain, right to
// left (the order of the backward pass), that keeps for every boundary and
// every set of gradients in flight there the exact Pareto front of partial
// plans over the chain's suffix (docs/solver.md "Algorithm").
//
// A partial plan is summarised per rollout-step class by four numbers that
// the peak is monotone in (solver_model.h composes the same quantities):
//   sum_f  bytes its segments add in the forward pass
//   q_f    max over its segments j of (forward peak_j − forward bytes of j and later)
//   sum_b  bytes its segments add in the backward pass
//   p_b    max over its segments j of (backward bytes of later segments + backward peak_j)
// plus its recompute time. Extending a suffix by one segment on the left
// updates them in O(1); so the front at the left end holds every plan that
// can be optimal for some budget.
//
// Parts: the chain program (solver_search.cpp) puts a plain stage or a
// region to the left of each front; a region's options come from the
// region program (region_program.h), an inner region's from the
// inner-region program (inner_region_program.h). Their labels' sums are
// suffix_sums.h's, their fronts and buckets pareto_front.h's.

#include <cstdint>
#include <vector>

#include "actmem/simulate/plan.h"
#include "solve/solver_model.h"

namespace actmem::detail {

struct SearchSpace {
  std::vector<std::int64_t> block_choices;  // sorted, distinct, >= 1
  bool nested_regions = true;
};

struct Candidate {
  Plan plan;
  std::int64_t peak_bytes = 0;  // the model's prediction, or a lower bound when peak_is_bound
  double recompute_s = 0;       // step time beyond the plan "none"
  bool peak_is_bound = false;   // peak_bytes ≤ the simulated peak, not equal to it (solver.cpp)
};

// Every plan of the space not dominated in (predicted peak, recompute time),
// by increasing peak. Plans with equal figures appear once.
std::vector<Candidate> search_frontier(ChainModel& model, const SearchSpace& space);

}  // namespace actmem::detail

#pragma once
// What the solver's three label programs (solver_search.cpp,
// region_program.h, inner_region_program.h) share: the model, the search
// space, the block counts each stage may take, the bucket key of a
// boundary, and the segments a plan is made of.

#include <cstdint>
#include <vector>

#include "actmem/simulate/plan.h"
#include "solve/pareto_front.h"
#include "solve/solver_model.h"
#include "solve/solver_search.h"

namespace actmem::detail {

// A choice made for the chain: a plain stage or a region, with its blocks.
struct Segment {
  Region region;  // from..to; a region when is_region
  bool is_region = false;
  std::vector<std::int64_t> blocks;  // per stage from..to
};

// Marks the end of a class's part of a boundary key (no byte count is
// negative, so keys of different boundaries never run into each other).
constexpr std::int64_t kEndOfClass = -1;

class SearchContext {
 public:
  SearchContext(ChainModel& model, const SearchSpace& space);

  ChainModel& model() const { return model_; }
  bool nested_regions() const { return space_.nested_regions; }
  int classes() const { return classes_; }
  // The block counts stage s may run with: the space's choices capped at
  // its edge count, distinct, in the space's order; {1} without edges.
  // Under the model's plan condition, its stage only those above 1, the
  // condition stages after it only 1 (ChainModel::condition_stages());
  // under the first stage's (ChainModel::first_stage()), the first stage
  // plain only 1 or only those above 1.
  std::vector<std::int64_t> choices(int s) const;
  // Under the first stage's condition (ChainModel::first_stage()), where
  // it runs work ahead at the top level: the first stage plain (in one
  // block, or in several: choices()) or in a region.
  bool first_stage_plain() const { return !model_.has_top_level_ahead() || model_.ahead_hoisted(); }
  bool first_stage_in_region() const { return !model_.has_top_level_ahead() || !model_.ahead_hoisted(); }
  // Boundary p's key: per class, ChainModel::boundary() then kEndOfClass.
  // Boundaries with equal keys behave alike for the stages left of them.
  std::vector<std::int64_t> boundary_key(int p, const ClassGrads& grads) const;

 private:
  ChainModel& model_;
  SearchSpace space_;
  int classes_;
  std::vector<std::int64_t> edges_;  // per stage
};

}  // namespace actmem::detail

#pragma once
// The inner-region program: every way to run stages [c0, d] as an inner
// region of a region [a, b] (a block count per stage), summarised as one
// piece of each of the enclosing region's three sequences (docs/solver.md
// "Algorithm", nesting). A dynamic program right to left over c0..d whose
// labels carry per class InnerSums (suffix_sums.h).

#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "solve/pareto_front.h"
#include "solve/search_context.h"
#include "solve/suffix_sums.h"

namespace actmem::detail {

// One way to run an inner region, per class as a piece of the enclosing
// region: the original forward, the region's recomputation (the inner
// region keeps its inputs, saves nothing), and the region's backward (the
// inner region's recomputation, its backward, then its held outputs and
// kept inputs released).
struct InnerUnit {
  PerClass<RegionPieces> pieces;
  double time_s = 0;
  std::vector<std::int64_t> blocks;  // stages c0..d
};
// The units that leave the same gradients in flight at c0.
struct InnerGroup {
  ClassGrads grads;
  std::vector<InnerUnit> units;
};

class InnerRegionProgram {
 public:
  explicit InnerRegionProgram(const SearchContext& context) : ctx_(context) {}

  // Every unit of [c0, d] inside [a, b], given the gradients in flight at
  // d + 1, that can be optimal: of units with the same gradients in flight
  // at c0 and the same sums, only those no other beats in every peak and
  // time. Cached (the reference stays valid for the program's life).
  // `pending`: pending work waits as the enclosing region starts (the units'
  // pieces then carry their pending parts).
  const std::vector<InnerGroup>& units(int a, int b, int c0, int d, const ClassGrads& grads_after,
                                       bool pending = false);

 private:
  struct Label {
    PerClass<InnerSums> sums;
    double time_s = 0;
    std::vector<std::int64_t> blocks;  // stages u..d
  };
  // A block count of stage u with its effects and what it hands on.
  struct StageOption {
    std::int64_t blocks = 1;
    PerClass<InnerStageEffects> effects;
    ClassGrads grads;                    // in flight at u
    std::vector<std::int64_t> boundary;  // key of boundary u
    double time_s = 0;
  };
  struct Bounds {
    int a, b, c0, d;  // the region as seen from [c0, d] (norm_bounds()), the inner region
    bool pending;     // as units()
  };

  std::vector<StageOption> stage_options(const Bounds& r, int u, const ClassGrads& grads_after) const;
  static void extend(Buckets<Label>& into, const std::vector<Label>& labels, const StageOption& option, bool pending);
  void keep_front(std::vector<Label>& labels, bool pending) const;
  std::vector<InnerGroup> close(const Bounds& r, Buckets<Label>& at_c0) const;

  const SearchContext& ctx_;
  std::map<std::pair<std::array<int, 5>, std::vector<std::int64_t>>, std::vector<InnerGroup>> cache_;
};

}  // namespace actmem::detail

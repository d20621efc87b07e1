#pragma once
// The region program: every way to run stages [a, b] as one top-level
// region (a block count per stage and, with nesting, inner regions),
// summarised as one segment of the chain (docs/solver.md "Algorithm",
// regions). A dynamic program right to left over b..a whose labels carry
// per class RegionSums (suffix_sums.h).

#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "solve/inner_region_program.h"
#include "solve/pareto_front.h"
#include "solve/search_context.h"
#include "solve/suffix_sums.h"

namespace actmem::detail {

// One way to run a region: its effects as a segment of the chain.
struct RegionOption {
  PerClass<SegmentEffect> effects;
  double time_s = 0;
  Segment segment;
  // In a pending program: its recomputation runs the pending work (its effects count it).
  bool sets_off = false;
};
// The options that leave the same gradients in flight at a.
struct RegionGroup {
  ClassGrads grads;
  std::vector<RegionOption> options;
};

class RegionProgram {
 public:
  explicit RegionProgram(const SearchContext& context) : ctx_(context), inner_(context) {}

  // Every option of [a, b], given the gradients in flight at b + 1, that
  // can be optimal: of options with the same gradients in flight at a and
  // the same bytes, only those no other beats in every peak and time.
  // Cached on (a, b, boundary b + 1); the reference, and the address of
  // every option's segment, stay valid for the program's life. `pending`:
  // pending work waits as the region starts.
  const std::vector<RegionGroup>& options(int a, int b, const ClassGrads& grads_after, bool pending = false);

 private:
  // A piece of a region: a plain stage's block count, or an inner region
  // with its unit; linked to the pieces to its right (a list in `parts`).
  struct Part {
    std::int64_t blocks = 0;          // plain stage
    const InnerUnit* unit = nullptr;  // inner region `inner`
    Region inner;
    int next = -1;
  };
  struct Label {
    PerClass<RegionSums> sums;
    double time_s = 0;
    int part = -1;  // its leftmost piece in Table::parts
  };
  // The program's state for one region.
  struct Table {
    int a = 0, b = 0;
    bool pending = false;
    std::vector<Buckets<Label>> at;  // at[t]: labels over stages t..b
    std::vector<Part> parts;
  };
  // Stage t as a plain child of the region: a block count, its pieces and
  // the gradients in flight at t after it.
  struct ChildOption {
    std::int64_t blocks = 1;
    PerClass<RegionPieces> pieces;
    ClassGrads grads;
    double time_s = 0;
  };

  std::vector<RegionGroup> solve(int a, int b, const ClassGrads& grads_after, bool pending);
  void keep_front(std::vector<Label>& labels, bool pending) const;
  void extend_from(Table& table, int t, const Bucket<Label>& from);
  void add(Table& table, const Bucket<Label>& from, const PerClass<RegionPieces>& pieces, const ClassGrads& grads,
           int left, double time_s, Part part);
  std::vector<RegionGroup> close(Table& table);
  Segment segment_of(const Table& table, const Label& label) const;
  const std::vector<ChildOption>& child_options(int t, int a, int b, const ClassGrads& grads_after, bool pending);

  const SearchContext& ctx_;
  InnerRegionProgram inner_;
  std::map<std::pair<std::array<int, 3>, std::vector<std::int64_t>>, std::vector<RegionGroup>> cache_;
  // child_options() by (t, norm_lo(t, a), norm_hi(t, b), pending), then boundary key at t + 1.
  std::map<std::array<int, 4>, std::map<std::vector<std::int64_t>, std::vector<ChildOption>>> child_cache_;
};

}  // namespace actmem::detail

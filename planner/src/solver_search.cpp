#include "solver_search.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
#include <tuple>
#include <utility>

#include "actmem/plan.h"
#include "actmem/simulator.h"

#include "pareto_front.h"
#include "suffix_sums.h"

namespace actmem::detail {
namespace {

// ---- What the three programs share

// What the solver's three label programs (chain, region, inner region;
// solver_search.cpp) share: the model, the search space, the block counts
// each stage may take, the bucket key of a boundary, and the segments a
// plan is made of.
// A choice made for the chain: a plain stage or a region, with its blocks.
struct Segment {
  Region region;                     // from..to; a region when is_region
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
  std::vector<std::int64_t> choices(int s) const;
  // Boundary p's key: per class, ChainModel::boundary() then kEndOfClass.
  // Boundaries with equal keys behave alike for the stages left of them.
  std::vector<std::int64_t> boundary_key(int p, const ClassGrads& grads) const;

 private:
  ChainModel& model_;
  SearchSpace space_;
  int classes_;
  std::vector<std::int64_t> edges_;  // per stage
};

SearchContext::SearchContext(ChainModel& model, const SearchSpace& space)
    : model_(model), space_(space), classes_(model.class_count()), edges_(edges_per_stage(model.graph())) {}

std::vector<std::int64_t> SearchContext::choices(int s) const {
  const std::int64_t edges = edges_[static_cast<std::size_t>(s)];
  if (edges <= 0) return {1};
  std::vector<std::int64_t> out;
  for (std::int64_t b : space_.block_choices) {
    const std::int64_t capped = std::min(b, edges);
    if (std::find(out.begin(), out.end(), capped) == out.end()) out.push_back(capped);
  }
  return out;
}

std::vector<std::int64_t> SearchContext::boundary_key(int p, const ClassGrads& grads) const {
  std::vector<std::int64_t> out;
  for (int c = 0; c < classes_; ++c) {
    const auto part = model_.boundary(c, p, grads[static_cast<std::size_t>(c)]);
    out.insert(out.end(), part.begin(), part.end());
    out.push_back(kEndOfClass);
  }
  return out;
}

// ---- The inner-region program
// The inner-region program: every way to run stages [c0, d] as an inner
// region of a region [a, b] (a block count per stage), summarised as one
// piece of each of the enclosing region's three sequences (docs/solver.md
// "Algorithm", nesting). A dynamic program right to left over c0..d whose
// labels carry per class InnerSums (suffix_sums.h).
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
  const std::vector<InnerGroup>& units(int a, int b, int c0, int d, const ClassGrads& grads_after);

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
    ClassGrads grads;                   // in flight at u
    std::vector<std::int64_t> boundary;  // key of boundary u
    double time_s = 0;
  };
  struct Bounds {
    int a, b, c0, d;  // the region as seen from [c0, d] (norm_bounds()), the inner region
  };

  std::vector<StageOption> stage_options(const Bounds& r, int u, const ClassGrads& grads_after) const;
  static void extend(Buckets<Label>& into, const std::vector<Label>& labels, const StageOption& option);
  std::vector<InnerGroup> close(const Bounds& r, Buckets<Label>& at_c0) const;

  const SearchContext& ctx_;
  std::map<std::pair<std::array<int, 4>, std::vector<std::int64_t>>, std::vector<InnerGroup>> cache_;
};

const std::vector<InnerGroup>& InnerRegionProgram::units(int a, int b, int c0, int d, const ClassGrads& grads_after) {
  // The units depend on the region only through its bounds as seen from [c0, d].
  std::tie(a, b) = ctx_.model().norm_bounds(c0, d, a, b);
  const Bounds r{a, b, c0, d};
  auto cache_key = std::make_pair(std::array<int, 4>{a, b, c0, d}, ctx_.boundary_key(d + 1, grads_after));
  if (auto it = cache_.find(cache_key); it != cache_.end()) return it->second;
  Buckets<Label> at;  // at boundary u + 1, then u
  Label start;
  for (int c = 0; c < ctx_.classes(); ++c) start.sums.push_back({});
  at.emplace(std::vector<std::int64_t>{}, Bucket<Label>{grads_after, {start}});
  for (int u = d; u >= c0; --u) {
    Buckets<Label> next;
    for (auto& [key, bucket] : at) {
      keep_pareto_front(bucket.labels);
      for (const StageOption& option : stage_options(r, u, bucket.grads)) extend(next, bucket.labels, option);
    }
    at = std::move(next);
  }
  return cache_[cache_key] = close(r, at);
}

// The block counts of stage u, those no better than another in every
// effect (same boundary, no less time) dropped.
std::vector<InnerRegionProgram::StageOption> InnerRegionProgram::stage_options(const Bounds& r, int u,
                                                                               const ClassGrads& grads_after) const {
  ChainModel& m = ctx_.model();
  std::vector<StageOption> options;
  std::vector<OptionCosts> costs;
  for (std::int64_t blocks : ctx_.choices(u)) {
    StageOption o{blocks, {}, grads_after, {}, 2 * m.stage_forward_s(u) + (blocks > 1 ? m.edge_forward_s(u) : 0.0)};
    OptionCosts cost;
    for (int c = 0; c < ctx_.classes(); ++c) {
      GradState& g = o.grads[static_cast<std::size_t>(c)];
      const Effect& forward = m.region_forward(c, u, blocks, r.a);
      const Effect& outer = m.recompute_in_inner(c, u, blocks, r.a, r.b, r.c0);
      const Effect& inner = m.inner_recompute(c, u, blocks, r.c0, r.d, m.signature(c, u, g));
      ChainModel::hand_over(inner, g);
      const InnerStageEffects e{{forward.forward_delta, forward.forward_peak},
                                {outer.forward_delta, outer.forward_peak},
                                {inner.forward_delta, inner.forward_peak},
                                {inner.backward_delta, inner.backward_peak},
                                inner.released_at_end};
      o.effects.push_back(e);
      cost.costs.insert(cost.costs.end(),
                        {e.forward.delta, e.forward.peak, e.outer_recompute.delta, e.outer_recompute.peak,
                         e.recompute.delta, e.recompute.peak, e.backward.delta, e.backward.peak, -e.released_at_end});
    }
    o.boundary = ctx_.boundary_key(u, o.grads);
    cost.same = o.boundary;
    cost.time_s = o.time_s;
    costs.push_back(std::move(cost));
    options.push_back(std::move(o));
  }
  const std::vector<char> keep = needed_options(costs);
  std::vector<StageOption> kept;
  for (std::size_t i = 0; i < options.size(); ++i)
    if (keep[i]) kept.push_back(std::move(options[i]));
  return kept;
}

// Puts `option`'s stage left of every label, into the bucket of its
// boundary and the labels' new sums.
void InnerRegionProgram::extend(Buckets<Label>& into, const std::vector<Label>& labels, const StageOption& option) {
  for (const Label& label : labels) {
    Label x = label;
    std::vector<std::int64_t> key = option.boundary;
    for (int c = 0; c < x.sums.size(); ++c) {
      InnerSums& s = x.sums[c];
      s.prepend(option.effects[c]);
      key.insert(key.end(), {s.forward.sum, s.outer_recompute.sum, s.folded.sum, s.minus_held});
    }
    x.time_s += option.time_s;
    x.blocks.insert(x.blocks.begin(), option.blocks);
    auto [it, inserted] = into.try_emplace(std::move(key));
    if (inserted) it->second.grads = option.grads;
    it->second.labels.push_back(std::move(x));
  }
}

// The labels at c0 as units, grouped by the gradients in flight at c0.
std::vector<InnerGroup> InnerRegionProgram::close(const Bounds& r, Buckets<Label>& at_c0) const {
  std::vector<std::int64_t> kept;  // per class: the inputs the inner region keeps
  for (int c = 0; c < ctx_.classes(); ++c) kept.push_back(ctx_.model().kept_bytes(c, r.c0, r.d, r.a, r.c0));
  std::map<std::vector<std::int64_t>, std::size_t> group_of;  // boundary key at c0 -> index in groups
  std::vector<InnerGroup> groups;
  for (auto& [key, bucket] : at_c0) {
    keep_pareto_front(bucket.labels);
    auto [git, inserted] = group_of.try_emplace(ctx_.boundary_key(r.c0, bucket.grads), groups.size());
    if (inserted) groups.push_back({bucket.grads, {}});
    InnerGroup& group = groups[git->second];
    for (Label& label : bucket.labels) {
      InnerUnit unit;
      for (int c = 0; c < label.sums.size(); ++c) {
        const InnerSums& s = label.sums[c];
        unit.pieces.push_back({{s.forward.sum, s.forward.peak},
                               {s.outer_recompute.sum, s.outer_recompute.peak},
                               {s.folded.sum + s.minus_held - kept[static_cast<std::size_t>(c)], s.folded.peak}});
      }
      unit.time_s = label.time_s;
      unit.blocks = std::move(label.blocks);
      group.units.push_back(std::move(unit));
    }
  }
  return groups;
}

// ---- The region program
// The region program: every way to run stages [a, b] as one top-level
// region (a block count per stage and, with nesting, inner regions),
// summarised as one segment of the chain (docs/solver.md "Algorithm",
// regions). A dynamic program right to left over b..a whose labels carry
// per class RegionSums (suffix_sums.h).
// One way to run a region: its effects as a segment of the chain.
struct RegionOption {
  PerClass<SegmentEffect> effects;
  double time_s = 0;
  Segment segment;
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
  // every option's segment, stay valid for the program's life.
  const std::vector<RegionGroup>& options(int a, int b, const ClassGrads& grads_after);

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

  std::vector<RegionGroup> solve(int a, int b, const ClassGrads& grads_after);
  void keep_front(std::vector<Label>& labels) const;
  void extend_from(Table& table, int t, const Bucket<Label>& from);
  void add(Table& table, const Bucket<Label>& from, const PerClass<RegionPieces>& pieces, const ClassGrads& grads,
           int left, double time_s, Part part);
  std::vector<RegionGroup> close(Table& table);
  Segment segment_of(const Table& table, const Label& label) const;
  const std::vector<ChildOption>& child_options(int t, int a, int b, const ClassGrads& grads_after);

  const SearchContext& ctx_;
  InnerRegionProgram inner_;
  std::map<std::pair<std::pair<int, int>, std::vector<std::int64_t>>, std::vector<RegionGroup>> cache_;
  // child_options() by (t, norm_lo(t, a), norm_hi(t, b)), then boundary key at t + 1.
  std::map<std::array<int, 3>, std::map<std::vector<std::int64_t>, std::vector<ChildOption>>> child_cache_;
};

const std::vector<RegionGroup>& RegionProgram::options(int a, int b, const ClassGrads& grads_after) {
  // The options depend only on the gradients in flight at b + 1.
  auto cache_key = std::make_pair(std::make_pair(a, b), ctx_.boundary_key(b + 1, grads_after));
  auto it = cache_.find(cache_key);
  if (it == cache_.end()) it = cache_.emplace(std::move(cache_key), solve(a, b, grads_after)).first;
  return it->second;
}

std::vector<RegionGroup> RegionProgram::solve(int a, int b, const ClassGrads& grads_after) {
  Table table{a, b, std::vector<Buckets<Label>>(static_cast<std::size_t>(b + 2)), {}};
  Label start;
  for (int c = 0; c < ctx_.classes(); ++c) start.sums.push_back({});
  table.at[static_cast<std::size_t>(b + 1)][ctx_.boundary_key(b + 1, grads_after)] = Bucket<Label>{grads_after, {start}};
  for (int t = b; t >= a; --t)
    for (auto& [key, bucket] : table.at[static_cast<std::size_t>(t + 1)]) {
      keep_front(bucket.labels);
      extend_from(table, t, bucket);
    }
  return close(table);
}

// A bucket's labels share their sums, so they compare on the two peaks per
// class and time; with one class a 2-D front.
void RegionProgram::keep_front(std::vector<Label>& labels) const {
  if (ctx_.classes() == 1)
    keep_pareto_front_2d(
        labels, [](const PerClass<RegionSums>& s) { return s[0].forward.peak; },
        [](const PerClass<RegionSums>& s) { return s[0].folded.peak; });
  else
    keep_pareto_front(labels);
}

// Puts every piece that ends at stage t left of `from`'s labels (covering
// t + 1..b): stage t as a plain child, then each inner region [c0, t].
void RegionProgram::extend_from(Table& table, int t, const Bucket<Label>& from) {
  for (const ChildOption& o : child_options(t, table.a, table.b, from.grads))
    add(table, from, o.pieces, o.grads, t, o.time_s, Part{o.blocks, nullptr, {}, -1});
  if (!ctx_.nested_regions()) return;
  for (int c0 = t; c0 >= table.a; --c0) {
    const Region inner{c0, t, {}};
    for (const InnerGroup& group : inner_.units(table.a, table.b, c0, t, from.grads))
      for (const InnerUnit& unit : group.units) add(table, from, unit.pieces, group.grads, c0, unit.time_s, Part{0, &unit, inner, -1});
  }
}

// Puts a piece (covering left..) left of every label of `from`, into the
// bucket at `left` of its boundary and the labels' new sums (the labels of
// a bucket share their sums, so all land in one bucket).
void RegionProgram::add(Table& table, const Bucket<Label>& from, const PerClass<RegionPieces>& pieces,
                        const ClassGrads& grads, int left, double time_s, Part part) {
  std::vector<std::int64_t> key = ctx_.boundary_key(left, grads);
  for (int c = 0; c < ctx_.classes(); ++c) {
    const RegionSums& s = from.labels.front().sums[c];
    const RegionPieces& p = pieces[c];
    key.insert(key.end(), {s.forward.sum + p.forward.delta, s.folded.sum + p.recompute.delta + p.backward.delta});
  }
  Buckets<Label>& into = table.at[static_cast<std::size_t>(left)];
  auto it = into.find(key);
  if (it == into.end()) it = into.emplace(std::move(key), Bucket<Label>{grads, {}}).first;
  for (const Label& label : from.labels) {
    Label x = label;
    for (int c = 0; c < ctx_.classes(); ++c) x.sums[c].prepend(pieces[c]);
    x.time_s += time_s;
    part.next = label.part;
    x.part = static_cast<int>(table.parts.size());
    table.parts.push_back(part);
    it->second.labels.push_back(x);
  }
}

// The labels at a as the region's options: forward bytes and peak, backward
// bytes (the folded sum less the inputs the region keeps) and peak.
std::vector<RegionGroup> RegionProgram::close(Table& table) {
  std::vector<std::int64_t> kept;  // per class
  for (int c = 0; c < ctx_.classes(); ++c) kept.push_back(ctx_.model().kept_bytes(c, table.a, table.b, -1, table.a));
  std::vector<RegionGroup> groups;
  for (auto& [key, bucket] : table.at[static_cast<std::size_t>(table.a)]) {
    keep_front(bucket.labels);
    RegionGroup group{bucket.grads, {}};
    for (const Label& label : bucket.labels) {
      RegionOption o;
      for (int c = 0; c < ctx_.classes(); ++c) {
        const RegionSums& s = label.sums[c];
        o.effects.push_back({{s.forward.sum, s.forward.peak}, {s.folded.sum - kept[static_cast<std::size_t>(c)], s.folded.peak}});
      }
      o.time_s = label.time_s;
      o.segment = segment_of(table, label);
      group.options.push_back(std::move(o));
    }
    groups.push_back(std::move(group));
  }
  return groups;
}

Segment RegionProgram::segment_of(const Table& table, const Label& label) const {
  Segment segment{{table.a, table.b, {}}, true, {}};
  for (int i = label.part; i >= 0; i = table.parts[static_cast<std::size_t>(i)].next) {
    const Part& p = table.parts[static_cast<std::size_t>(i)];
    if (!p.unit) {
      segment.blocks.push_back(p.blocks);
      continue;
    }
    segment.blocks.insert(segment.blocks.end(), p.unit->blocks.begin(), p.unit->blocks.end());
    segment.region.inner.push_back(p.inner);
  }
  return segment;
}

// Stage t's block counts as a plain child of [a, b], those no better than
// another in every effect (same boundary, no less time) dropped. They depend
// on the region only through t's context bounds, so are cached on those.
const std::vector<RegionProgram::ChildOption>& RegionProgram::child_options(int t, int a, int b,
                                                                           const ClassGrads& grads_after) {
  ChainModel& m = ctx_.model();
  auto& by_boundary = child_cache_[{t, m.norm_lo(t, a), m.norm_hi(t, b)}];
  std::vector<std::int64_t> boundary = ctx_.boundary_key(t + 1, grads_after);
  if (auto it = by_boundary.find(boundary); it != by_boundary.end()) return it->second;
  std::vector<ChildOption> options;
  std::vector<OptionCosts> costs;
  for (std::int64_t blocks : ctx_.choices(t)) {
    ChildOption o{blocks, {}, grads_after, m.stage_forward_s(t) + (blocks > 1 ? m.edge_forward_s(t) : 0.0)};
    OptionCosts cost;
    for (int c = 0; c < ctx_.classes(); ++c) {
      GradState& g = o.grads[static_cast<std::size_t>(c)];
      const Effect& f = m.region_forward(c, t, blocks, a);
      const Effect& r = m.recompute_plain(c, t, blocks, a, b, m.signature(c, t, g));
      ChainModel::hand_over(r, g);
      o.pieces.push_back({{f.forward_delta, f.forward_peak}, {r.forward_delta, r.forward_peak}, {r.backward_delta, r.backward_peak}});
      cost.costs.insert(cost.costs.end(),
                        {f.forward_delta, f.forward_peak, r.forward_delta, r.forward_peak, r.backward_delta, r.backward_peak});
    }
    cost.same = ctx_.boundary_key(t, o.grads);
    cost.time_s = o.time_s;
    costs.push_back(std::move(cost));
    options.push_back(std::move(o));
  }
  const std::vector<char> keep = needed_options(costs);
  std::vector<ChildOption> kept;
  for (std::size_t i = 0; i < options.size(); ++i)
    if (keep[i]) kept.push_back(std::move(options[i]));
  return by_boundary.emplace(std::move(boundary), std::move(kept)).first->second;
}

// The chain program: right to left over the chain's boundaries, partial
// plans over the suffix as labels of per-class ChainSums, bucketed by the
// gradients in flight at their left boundary and sum_f + sum_b per class.
// Each step puts a plain stage or a region (RegionProgram) to the left.
class ChainProgram {
 public:
  ChainProgram(ChainModel& model, const SearchSpace& space)
      : ctx_(model, space), m_(model), n_(model.stage_count()), k_(model.class_count()), regions_(ctx_) {}

  std::vector<Candidate> run();

 private:
  // A partial plan's segments, as a link to the segments to its right.
  struct Trail {
    const Segment* segment = nullptr;  // owned by the search (stable address)
    int next = -1;                     // the trail to the right, -1: none
  };
  struct Label {
    PerClass<ChainSums> sums;
    double time_s = 0;
    int trail = -1;
    std::int64_t standalone_peak = 0;  // one class: peak_of() (keep_front())
  };

  Buckets<Label> right_end();
  void add_plain_stage(Buckets<Label>& into, const Bucket<Label>& from, int b);
  void extend(Buckets<Label>& into, const Bucket<Label>& from, const PerClass<SegmentEffect>& effects,
              const ClassGrads& grads, double time_s, const Segment& segment, int a);
  void make_extended(const Bucket<Label>& from, const PerClass<SegmentEffect>& effects, double time_s);
  int link(const Segment& segment, int next);
  void keep_front(std::vector<Label>& labels);
  std::vector<Candidate> frontier(Buckets<Label>& left_end);
  Plan plan_of(int trail) const;
  std::int64_t peak_of(const Label& l) const;

  SearchContext ctx_;
  ChainModel& m_;
  int n_, k_;
  RegionProgram regions_;
  std::vector<Trail> trail_;
  std::vector<Label> fresh_, merged_;                 // extend()'s scratch
  std::deque<Segment> plain_segments_;                 // the plain-stage choices trails point to
  std::vector<Effect> loss_forward_, loss_backward_;  // per class: the loss stage, and its backward with no gradients in flight
};

std::vector<Candidate> ChainProgram::run() {
  for (int c = 0; c < k_; ++c) {
    GradState none;
    loss_forward_.push_back(m_.loss(c));
    loss_backward_.push_back(m_.loss(c, m_.signature(c, n_, none)));
  }
  std::vector<Buckets<Label>> at(static_cast<std::size_t>(n_ + 1));  // at[p]: labels over stages p..n_-1
  at[static_cast<std::size_t>(n_)] = right_end();
  for (int p = n_; p > 0; --p) {
    for (auto& [key, bucket] : at[static_cast<std::size_t>(p)]) {
      keep_front(bucket.labels);
      const int b = p - 1;
      add_plain_stage(at[static_cast<std::size_t>(b)], bucket, b);
      for (int a = b; a >= 0; --a)
        for (const RegionGroup& group : regions_.options(a, b, bucket.grads))
          for (const RegionOption& o : group.options)
            extend(at[static_cast<std::size_t>(a)], bucket, o.effects, group.grads, o.time_s, o.segment, a);
    }
  }
  return frontier(at[0]);
}

// After each class's loss backward: one empty plan.
Buckets<ChainProgram::Label> ChainProgram::right_end() {
  Bucket<Label> start;
  Label l;
  for (int c = 0; c < k_; ++c) {
    GradState g;
    ChainModel::hand_over(m_.loss(c, m_.signature(c, n_, g)), g);
    start.grads.push_back(std::move(g));
    l.sums.push_back({});
  }
  if (k_ == 1) l.standalone_peak = peak_of(l);
  start.labels.push_back(l);
  Buckets<Label> out;
  out[ctx_.boundary_key(n_, start.grads)] = std::move(start);
  return out;
}

// Stage b as a plain segment, each of its block counts not dominated in
// every effect (same bytes and gradients handed on, no lower peaks, no less
// time) put left of `from`'s labels.
void ChainProgram::add_plain_stage(Buckets<Label>& into, const Bucket<Label>& from, int b) {
  struct Option {
    std::int64_t blocks;
    PerClass<SegmentEffect> effects;
    ClassGrads grads;  // in flight at b
  };
  std::vector<Option> options;
  std::vector<OptionCosts> costs;
  for (std::int64_t blocks : ctx_.choices(b)) {
    Option o{blocks, {}, from.grads};
    OptionCosts cost;
    for (int c = 0; c < k_; ++c) {
      GradState& g = o.grads[static_cast<std::size_t>(c)];
      const Effect& e = m_.plain(c, b, blocks, m_.signature(c, b, g));
      ChainModel::hand_over(e, g);
      o.effects.push_back({{e.forward_delta, e.forward_peak}, {e.backward_delta, e.backward_peak}});
      cost.same.insert(cost.same.end(), {e.forward_delta, e.backward_delta});
      cost.costs.insert(cost.costs.end(), {e.forward_peak, e.backward_peak});
    }
    const std::vector<std::int64_t> boundary = ctx_.boundary_key(b, o.grads);
    cost.same.insert(cost.same.end(), boundary.begin(), boundary.end());
    cost.time_s = blocks > 1 ? m_.edge_forward_s(b) : 0.0;
    costs.push_back(std::move(cost));
    options.push_back(std::move(o));
  }
  const std::vector<char> keep = needed_options(costs);
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (!keep[i]) continue;
    const Segment& plain = plain_segments_.emplace_back(Segment{{b, b, {}}, false, {options[i].blocks}});
    extend(into, from, options[i].effects, options[i].grads, costs[i].time_s, plain, b);
  }
}

// Puts `segment` (covering a..) left of every label of `from` (whose front
// is kept: keep_front()), into the bucket of its boundary (`grads` in
// flight at a) and the labels' new sum_f + sum_b per class (the labels of
// a bucket share them, so all land in one bucket).
void ChainProgram::extend(Buckets<Label>& into, const Bucket<Label>& from, const PerClass<SegmentEffect>& effects,
                          const ClassGrads& grads, double time_s, const Segment& segment, int a) {
  std::vector<std::int64_t> key = ctx_.boundary_key(a, grads);
  for (int c = 0; c < k_; ++c) {
    const ChainSums& s = from.labels.front().sums[c];
    const SegmentEffect& e = effects[c];
    key.push_back(s.sum_f + s.sum_b + e.forward.delta + e.backward.delta);
  }
  auto it = into.find(key);
  if (it == into.end()) it = into.emplace(std::move(key), Bucket<Label>{grads, {}}).first;
  std::vector<Label>& labels = it->second.labels;
  make_extended(from, effects, time_s);
  if (k_ == 1) {
    merge_staircases(
        labels, fresh_, merged_, [](const Label& l) { return l.standalone_peak; },
        [&](Label& l) { l.trail = link(segment, l.trail); });
    return;
  }
  for (Label& x : fresh_) {
    x.trail = link(segment, x.trail);
    labels.push_back(x);
  }
}

// fresh_ = `from`'s labels extended by a segment (trails still those to
// its right). With one class, a label's standalone peak after the segment
// is max(A, d + its peak before) for A and d fixed by the segment and the
// bucket; the labels come by increasing time and decreasing peak, so once
// two in a row give the same peak (A) every later one gives it too, more
// slowly: dominated, left out. So fresh_ is a staircase too.
void ChainProgram::make_extended(const Bucket<Label>& from, const PerClass<SegmentEffect>& effects, double time_s) {
  fresh_.clear();
  std::int64_t previous_peak = kNoPeak;
  for (const Label& l : from.labels) {
    Label x;
    x.sums = l.sums;
    for (int c = 0; c < k_; ++c) x.sums[c].prepend(effects[c]);
    x.time_s = l.time_s + time_s;
    x.trail = l.trail;
    if (k_ == 1) {
      x.standalone_peak = peak_of(x);
      if (x.standalone_peak == previous_peak) break;
      previous_peak = x.standalone_peak;
    }
    fresh_.push_back(x);
  }
}

// A new trail: `segment`, then trail `next`.
int ChainProgram::link(const Segment& segment, int next) {
  trail_.push_back({&segment, next});
  return static_cast<int>(trail_.size()) - 1;
}

// Keeps the labels of a bucket that can still be optimal. With one step
// class (rollout 1) a suffix S enters the final peak only through
// F(P) + peak_of(S), F(P) being the forward bytes of the prefix P put to
// its left, beside terms fixed by the bucket (its gradients in flight and
// sum_f + sum_b); docs/solver.md "Why it is exact". So of two labels the
// one no larger in peak_of and no slower dominates: a 1-D front, exact for
// every budget, which extend() keeps as labels are added. With several
// classes the prefix's bytes enter each class's terms with different
// coefficients: the front over ChainSums per class.
void ChainProgram::keep_front(std::vector<Label>& labels) {
  if (k_ != 1) keep_pareto_front(labels);
}

// Left end: every label a complete plan; their exact (peak, time) front,
// by increasing peak.
std::vector<Candidate> ChainProgram::frontier(Buckets<Label>& left_end) {
  std::vector<Candidate> out;
  for (auto& [key, bucket] : left_end) {
    keep_front(bucket.labels);
    for (const Label& l : bucket.labels) out.push_back({plan_of(l.trail), peak_of(l), l.time_s * m_.steps()});
  }
  std::sort(out.begin(), out.end(), [](const Candidate& a, const Candidate& b) {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    return a.recompute_s < b.recompute_s;
  });
  std::vector<Candidate> front;
  for (Candidate& c : out)
    if (front.empty() || c.recompute_s < front.back().recompute_s) front.push_back(std::move(c));
  return front;
}

Plan ChainProgram::plan_of(int trail) const {
  Plan plan = empty_plan(m_.graph().stages());
  for (int i = trail; i >= 0; i = trail_[static_cast<std::size_t>(i)].next) {
    const Segment& t = *trail_[static_cast<std::size_t>(i)].segment;
    for (int s = t.region.from; s <= t.region.to; ++s)
      plan.edge_blocks[static_cast<std::size_t>(s)] = t.blocks[static_cast<std::size_t>(s - t.region.from)];
    if (t.is_region) plan.checkpoints.push_back(t.region);
  }
  return plan;
}

// The step's peak from a label over the whole chain: rollout steps run
// forward in order, then backward in reverse (solver_model.cpp predict()).
std::int64_t ChainProgram::peak_of(const Label& l) const {
  const int steps = m_.steps();
  std::int64_t mem = 0, peak = 0;
  for (int step = 0; step < steps; ++step) {
    const int c = m_.class_of(step);
    const Effect& loss = loss_forward_[static_cast<std::size_t>(c)];
    peak = std::max(peak, mem + l.sums[c].sum_f + l.sums[c].q_f);
    mem += l.sums[c].sum_f;
    peak = std::max(peak, mem + loss.forward_peak);
    mem += loss.forward_delta;
  }
  for (int step = 0; step < steps; ++step) mem += loss_forward_[static_cast<std::size_t>(m_.class_of(step))].backward_prelude;
  for (int step = steps - 1; step >= 0; --step) {
    const int c = m_.class_of(step);
    const Effect& loss = loss_backward_[static_cast<std::size_t>(c)];
    peak = std::max(peak, mem + loss.backward_peak);
    mem += loss.backward_delta;
    peak = std::max(peak, mem + l.sums[c].p_b);
    mem += l.sums[c].sum_b;
  }
  peak = std::max(peak, mem);
  return m_.static_bytes() + peak;
}

}  // namespace

std::vector<Candidate> search_frontier(ChainModel& model, const SearchSpace& space) {
  return ChainProgram(model, space).run();
}

}  // namespace actmem::detail

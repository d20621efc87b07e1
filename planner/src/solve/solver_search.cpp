#include "solve/solver_search.h"

#include <algorithm>
#include <array>
#include <deque>
#include <stdexcept>

#include "solve/pareto_front.h"
#include "solve/region_program.h"
#include "solve/search_context.h"
#include "solve/suffix_sums.h"

namespace actmem::detail {
namespace {

// The candidates no other beats in (peak, recompute time), by increasing
// peak; of equal figures, one.
std::vector<Candidate> pareto_candidates(std::vector<Candidate> all) {
  std::sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.peak_bytes != b.peak_bytes) return a.peak_bytes < b.peak_bytes;
    return a.recompute_s < b.recompute_s;
  });
  std::vector<Candidate> front;
  for (Candidate& c : all)
    if (front.empty() || c.recompute_s < front.back().recompute_s) front.push_back(std::move(c));
  return front;
}

// The chain program: right to left over the chain's boundaries, partial
// plans over the suffix as labels of per-class ChainSums, bucketed by the
// gradients in flight at their left boundary and sum_f + sum_b per class.
// Each step puts a plain stage or a region (`regions`, which programs of
// one context may share: it caches its options) to the left.
class ChainProgram {
 public:
  ChainProgram(const SearchContext& context, RegionProgram& regions)
      : ctx_(context), m_(context.model()), n_(m_.stage_count()), k_(m_.class_count()), regions_(regions) {}

  // search_frontier(): every plan not dominated in (peak, time), by
  // increasing peak.
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
    // Pending work waits at the left boundary: the bucket's (extend()
    // keys on it).
    bool pending = false;
  };

  Buckets<Label> right_end();
  // `effects` of a segment ending at stage b, followed where b is the last
  // stage by the first stage's work run ahead at the top level when the
  // model hoists it, given the gradients in flight after it.
  PerClass<SegmentEffect> with_ahead(int b, const PerClass<SegmentEffect>& effects, const ClassGrads& grads);
  void add_plain_stage(Buckets<Label>& into, const Bucket<Label>& from, int b);
  void extend(Buckets<Label>& into, const Bucket<Label>& from, const PerClass<SegmentEffect>& effects,
              const ClassGrads& grads, double time_s, const Segment& segment, int a, bool pending);
  void make_extended(const Bucket<Label>& from, const PerClass<SegmentEffect>& effects, double time_s, bool pending);
  int link(const Segment& segment, int next);
  void keep_front(std::vector<Label>& labels);
  std::vector<Candidate> frontier(Buckets<Label>& left_end);
  Plan plan_of(int trail) const;
  std::int64_t peak_of(const Label& l, bool complete = false) const;
  std::int64_t loop_peak_of(const Label& l, const LoopBody& loop) const;
  std::int64_t body_peak(const ChainSums& s, int c) const;

  const SearchContext& ctx_;
  ChainModel& m_;
  int n_, k_;
  RegionProgram& regions_;
  std::vector<Trail> trail_;
  std::vector<Label> fresh_, merged_;   // extend()'s scratch
  std::deque<Segment> plain_segments_;  // the plain-stage choices trails point to
  // Per class: the loss stage, and its backward with no gradients in flight.
  std::vector<Effect> loss_forward_, loss_backward_;
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
      if (b > 0 || ctx_.first_stage_plain()) add_plain_stage(at[static_cast<std::size_t>(b)], bucket, b);
      const bool pending = bucket.labels.front().pending;
      for (int a = b; a >= 0; --a) {
        if (a == 0 && !ctx_.first_stage_in_region()) continue;
        for (const RegionGroup& group : regions_.options(a, b, bucket.grads, pending))
          for (const RegionOption& o : group.options)
            extend(at[static_cast<std::size_t>(a)], bucket, with_ahead(b, o.effects, group.grads), group.grads,
                   o.time_s, o.segment, a, pending && !o.sets_off);
      }
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
  std::vector<std::int64_t> key = ctx_.boundary_key(n_, start.grads);
  key.push_back(0);  // nothing pending (extend())
  out[std::move(key)] = std::move(start);
  return out;
}

PerClass<SegmentEffect> ChainProgram::with_ahead(int b, const PerClass<SegmentEffect>& effects,
                                                 const ClassGrads& grads) {
  if (b != n_ - 1 || !m_.ahead_hoisted()) return effects;
  PerClass<SegmentEffect> out = effects;
  for (int c = 0; c < k_; ++c) {
    // Under its condition the first stage's block counts free the same
    // (ChainModel::FirstStage), which is checked.
    const std::vector<std::int64_t> choices = ctx_.choices(0);
    const Piece ahead = m_.top_level_ahead_effect(c, choices.front(), grads[static_cast<std::size_t>(c)]);
    for (std::int64_t blocks : choices) {
      const Piece other = m_.top_level_ahead_effect(c, blocks, grads[static_cast<std::size_t>(c)]);
      if (other.delta != ahead.delta || other.peak != ahead.peak)
        throw std::logic_error("solver: the first stage's work run ahead depends on how many edge blocks it has");
    }
    Piece& backward = out[c].backward;
    backward = {backward.delta + ahead.delta, std::max(backward.peak, backward.delta + ahead.peak)};
  }
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
    bool pending;      // pending work waits after it
  };
  std::vector<Option> options;
  std::vector<OptionCosts> costs;
  for (std::int64_t blocks : ctx_.choices(b)) {
    Option o{blocks, {}, from.grads, from.labels.front().pending};
    OptionCosts cost;
    for (int c = 0; c < k_; ++c) {
      GradState& g = o.grads[static_cast<std::size_t>(c)];
      const Effect& e = m_.plain(c, b, blocks, m_.signature(c, b, g), from.labels.front().pending);
      ChainModel::hand_over(e, g);
      o.pending = (o.pending && !e.backward_ran_pending) || e.leaves_pending;
      o.effects.push_back({{e.forward_delta, e.forward_peak}, {e.backward_delta, e.backward_peak}});
      cost.same.insert(cost.same.end(), {e.forward_delta, e.backward_delta});
      cost.costs.insert(cost.costs.end(), {e.forward_peak, e.backward_peak});
    }
    o.effects = with_ahead(b, o.effects, o.grads);
    const std::vector<std::int64_t> boundary = ctx_.boundary_key(b, o.grads);
    cost.same.insert(cost.same.end(), boundary.begin(), boundary.end());
    cost.same.push_back(o.pending ? 1 : 0);
    cost.time_s = blocks > 1 ? m_.edge_forward_s(b) : 0.0;
    costs.push_back(std::move(cost));
    options.push_back(std::move(o));
  }
  const std::vector<char> keep = needed_options(costs);
  for (std::size_t i = 0; i < options.size(); ++i) {
    if (!keep[i]) continue;
    const Segment& plain = plain_segments_.emplace_back(Segment{{b, b, {}}, false, {options[i].blocks}});
    extend(into, from, options[i].effects, options[i].grads, costs[i].time_s, plain, b, options[i].pending);
  }
}

// Puts `segment` (covering a..) left of every label of `from` (whose front
// is kept: keep_front()), into the bucket of its boundary (`grads` in
// flight at a), the labels' new sum_f + sum_b per class (the labels of
// a bucket share them, so all land in one bucket) and whether the
// pending work waits after it (`pending`).
void ChainProgram::extend(Buckets<Label>& into, const Bucket<Label>& from, const PerClass<SegmentEffect>& effects,
                          const ClassGrads& grads, double time_s, const Segment& segment, int a, bool pending) {
  std::vector<std::int64_t> key = ctx_.boundary_key(a, grads);
  for (int c = 0; c < k_; ++c) {
    const ChainSums& s = from.labels.front().sums[c];
    const SegmentEffect& e = effects[c];
    key.push_back(s.sum_f + s.sum_b + e.forward.delta + e.backward.delta);
  }
  key.push_back(pending ? 1 : 0);
  auto it = into.find(key);
  if (it == into.end()) it = into.emplace(std::move(key), Bucket<Label>{grads, {}}).first;
  std::vector<Label>& labels = it->second.labels;
  make_extended(from, effects, time_s, pending);
  if (k_ == 1) {  // both staircases (keep_front())
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
void ChainProgram::make_extended(const Bucket<Label>& from, const PerClass<SegmentEffect>& effects, double time_s,
                                 bool pending) {
  fresh_.clear();
  std::int64_t previous_peak = kNoPeak;
  for (const Label& l : from.labels) {
    Label x;
    x.pending = pending;
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
// coefficients: the front over ChainSums per class, except in a loop body
// (loop_peak_of()): there each class's body is a program of its own, which
// a suffix enters only through F_c(P) + body_peak(S, c) beside terms the
// bucket fixes, as above; so the front over the classes' body peaks.
void ChainProgram::keep_front(std::vector<Label>& labels) {
  if (k_ == 1) return;
  if (!m_.loop()) {
    keep_pareto_front(labels, [&](const Label& l) {
      return class_values<3>(k_, [&](int c) {
        const ChainSums& s = l.sums[c];
        return std::array{s.sum_f, s.q_f, s.p_b};
      });
    });
    return;
  }
  keep_pareto_front(labels, [&](const Label& l) {
    return class_values<1>(k_, [&](int c) { return std::array{body_peak(l.sums[c], c)}; });
  });
}

// Left end: every label a complete plan; their exact (peak, time) front,
// by increasing peak.
std::vector<Candidate> ChainProgram::frontier(Buckets<Label>& left_end) {
  std::vector<Candidate> out;
  for (auto& [key, bucket] : left_end) {
    keep_front(bucket.labels);
    for (const Label& l : bucket.labels)
      out.push_back({plan_of(l.trail), peak_of(l, /*complete=*/true), l.time_s * m_.steps()});
  }
  return pareto_candidates(std::move(out));
}

// The plan a trail's segments make (stages no segment covers: plain, one block).
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
// With pending work still waiting, a
// `complete` plan runs it as the backward pass ends; a suffix's standalone
// peak leaves out that and the optimizer step, terms a prefix to its left
// may change but the bucket fixes (keep_front()).
std::int64_t ChainProgram::peak_of(const Label& l, bool complete) const {
  if (m_.loop()) return loop_peak_of(l, *m_.loop());
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
  for (int step = 0; step < steps; ++step)
    mem += loss_forward_[static_cast<std::size_t>(m_.class_of(step))].backward_prelude;
  for (int step = steps - 1; step >= 0; --step) {
    const int c = m_.class_of(step);
    const Effect& loss = loss_backward_[static_cast<std::size_t>(c)];
    peak = std::max(peak, mem + loss.backward_peak);
    mem += loss.backward_delta;
    peak = std::max(peak, mem + l.sums[c].p_b);
    mem += l.sums[c].sum_b;
  }
  if (l.pending) {
    if (!complete) return m_.static_bytes() + peak;
    peak = std::max(peak, mem + m_.pending_effect().peak);
    mem += m_.pending_effect().delta;
  }
  peak = std::max(peak, mem);
  return m_.static_bytes() + peak;
}

// The same for a loop body (solver_model.cpp predict()): per class, the
// most memory its steps' bodies start from plus its body's peak. Out of
// line: inlined into peak_of(), it slows the one-class path of the
// rollout-1 search (callgrind: 0.35% more instructions for `fit`).
[[gnu::noinline]] std::int64_t ChainProgram::loop_peak_of(const Label& l, const LoopBody& loop) const {
  std::int64_t peak = loop.optimizer_bytes;
  for (int c = 0; c < k_; ++c) {
    const std::int64_t body = std::max<std::int64_t>(0, body_peak(l.sums[c], c));
    peak = std::max(peak, loop.class_start_bytes[static_cast<std::size_t>(c)] + body);
  }
  return peak;
}

// Class c's loop body over a suffix with sums `s`: the most memory, relative
// to the memory the body starts from, that its executions reach (the
// suffix's recomputation, the loss, its backward with no gradients in
// flight, then the suffix's backward; the start itself not counted).
// Putting a segment e to the left makes it max(e's forward peak, e's
// forward bytes + body_peak(s, c), a term fixed by e and the bucket's
// sum_f + sum_b): so it ranks a bucket's labels for every prefix
// (keep_front()).
std::int64_t ChainProgram::body_peak(const ChainSums& s, int c) const {
  const Effect& loss_forward = loss_forward_[static_cast<std::size_t>(c)];
  const Effect& loss_backward = loss_backward_[static_cast<std::size_t>(c)];
  std::int64_t mem = s.sum_f, body = s.sum_f + s.q_f;
  body = std::max(body, mem + loss_forward.forward_peak);
  mem += loss_forward.forward_delta;
  body = std::max(body, mem + loss_backward.backward_peak);
  mem += loss_backward.backward_delta;
  return std::max(body, mem + s.p_b);
}

}  // namespace

// Under plan conditions the search runs once per condition of the model
// (no condition stage blocked, or each as the last one blocked), and where
// the first stage runs work ahead at the top level once per condition of
// the first stage (in a region, plain in one block, plain in blocks)
// within each: each run's plans are those of its conditions, which its
// executions assume; the union's front is the frontier.
std::vector<Candidate> search_frontier(ChainModel& model, const SearchSpace& space) {
  const SearchContext ctx(model, space);
  if (model.condition_stages().empty() && !model.has_top_level_ahead()) {
    RegionProgram regions(ctx);
    return ChainProgram(ctx, regions).run();
  }
  std::vector<int> conditions{-1};
  conditions.insert(conditions.end(), model.condition_stages().begin(), model.condition_stages().end());
  using FirstStage = ChainModel::FirstStage;
  std::vector<FirstStage> first{FirstStage::in_region};
  if (model.has_top_level_ahead()) first.insert(first.end(), {FirstStage::plain, FirstStage::plain_blocked});
  std::vector<Candidate> all;
  for (int last : conditions) {
    model.set_condition(last);
    model.set_first_stage(FirstStage::in_region);
    if (last >= 0 && ctx.choices(last).empty()) continue;  // it cannot run in blocks
    // The first stage's conditions share the regions' options: with it
    // plain no region starts there, and the other stages' choices are the
    // same under all three.
    RegionProgram regions(ctx);
    for (FirstStage f : first) {
      model.set_first_stage(f);
      if (ctx.choices(0).empty()) continue;  // the first stage cannot run so
      for (Candidate& c : ChainProgram(ctx, regions).run()) all.push_back(std::move(c));
    }
  }
  model.set_condition(-1);
  model.set_first_stage(FirstStage::in_region);
  return pareto_candidates(std::move(all));
}

}  // namespace actmem::detail

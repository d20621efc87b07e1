#pragma once
// The sums that summarise a partial plan in the solver's label programs
// (solver_search.h, docs/solver.md "Algorithm"). Every program runs right
// to left, so each sum is extended by putting one execution to the left of
// those it covers, in O(1); the final peak never decreases as any compared
// value grows, which is what makes their Pareto fronts (pareto_front.h)
// exact.

#include <algorithm>
#include <array>
#include <cassert>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace actmem::detail {

// "No execution yet" for the peak accumulators: below every real value and
// far from overflow when added to.
constexpr std::int64_t kNoPeak = std::numeric_limits<std::int64_t>::min() / 4;

// One execution's memory effect relative to the memory before it: its net
// change and its local peak.
struct Piece {
  std::int64_t delta = 0, peak = 0;
};

// Rollout-step classes: first, middle, last (ChainModel::class_count()).
constexpr std::size_t kMaxClasses = 3;

// One value per rollout-step class, kept inline. Compared lexicographically.
template <class T>
class PerClass {
 public:
  void push_back(const T& value) {
    assert(static_cast<std::size_t>(n_) < kMaxClasses);
    items_[static_cast<std::size_t>(n_++)] = value;
  }
  int size() const { return n_; }
  T& operator[](int c) { return items_[static_cast<std::size_t>(c)]; }
  const T& operator[](int c) const { return items_[static_cast<std::size_t>(c)]; }
  const T* begin() const { return items_.data(); }
  const T* end() const { return items_.data() + n_; }
  friend bool operator<(const PerClass& x, const PerClass& y) {
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
  }

 private:
  std::array<T, kMaxClasses> items_{};
  int n_ = 0;
};

// A sequence of executions in absolute form: its bytes and its peak
// relative to the memory before its first execution.
struct Run {
  std::int64_t sum = 0, peak = kNoPeak;
  // Puts `p` before the sequence.
  void prepend(Piece p) {
    peak = std::max(p.peak, p.delta + peak);
    sum += p.delta;
  }
  // Folded form of "recomputations left to right, then their backward right
  // to left": puts a stage whose recomputation runs first and whose
  // backward runs last around the sequence. sum covers both passes.
  void prepend_around(Piece recompute, Piece backward) {
    peak = std::max({recompute.peak, recompute.delta + peak, recompute.delta + sum + backward.peak});
    sum += recompute.delta + backward.delta;
  }
  auto operator<=>(const Run&) const = default;
};

// `pending`: a sequence like `plain` in which the pending work runs in
// the leftmost piece that can run it
// (`set_off`: one does). Puts a piece before both, given as it runs
// without (`piece`) and with it run (`piece_pending`, when `sets_off`):
// one that runs it restarts `pending` from `plain` (call before `plain`
// takes the piece), since what runs after it runs as without.
inline void prepend_pending(Run& pending, bool& set_off, const Run& plain, Piece piece, Piece piece_pending,
                            bool sets_off) {
  if (sets_off) {
    pending = plain;
    pending.prepend(piece_pending);
    set_off = true;
  } else {
    pending.prepend(piece);
  }
}

// A segment of the chain (plain stage or region) in one class.
struct SegmentEffect {
  Piece forward, backward;
};

// A suffix of the chain in one class (solver_search.h):
//   sum_f  bytes its segments add in the forward pass
//   q_f    max over its segments j of (forward peak_j − forward bytes of j and later)
//   sum_b  bytes its segments add in the backward pass
//   p_b    max over its segments j of (backward bytes of later segments + backward peak_j)
// Buckets fix sum_f + sum_b, so sum_b is not compared.
struct ChainSums {
  std::int64_t sum_f = 0, q_f = kNoPeak, sum_b = 0, p_b = kNoPeak;
  void prepend(const SegmentEffect& e) {
    q_f = std::max(q_f, e.forward.peak - (e.forward.delta + sum_f));
    sum_f += e.forward.delta;
    p_b = std::max(p_b, sum_b + e.backward.peak);
    sum_b += e.backward.delta;
  }
  auto operator<=>(const ChainSums&) const = default;
};

// A piece of a region in one class: its part of the original forward, of
// the region's recomputation, and of the region's backward. When pending
// work waits as the region starts:
// its part of the recomputation then (recompute_pending; the same as
// recompute unless the piece runs it: sets_off).
struct RegionPieces {
  Piece forward, recompute, backward;
  Piece recompute_pending = {};
  bool sets_off = false;
  // The work the piece runs ahead, recomputed and differentiated before
  // the region's recomputation (zero: none); with pending work waiting
  // (ahead_pending; whether it runs it: ahead_sets_off).
  Piece ahead = {}, ahead_pending = {};
  bool ahead_sets_off = false;
};

// Stages t..b of a region [a, b] in one class: the original forward, and
// the recomputation followed by the backward, folded; and the same folded
// with pending work waiting as stage t's recomputation starts: the
// leftmost piece that sets it off runs it, the pieces to its right run as
// in `folded` (set_off: one did).
struct RegionSums {
  Run forward, folded, folded_pending;
  bool set_off = false;
  // The pieces' work run ahead, left to right, before all of `folded`;
  // the same with pending work waiting, run by the leftmost that can
  // (ahead_set_off: one did).
  Run ahead, ahead_pending;
  bool ahead_set_off = false;
  void prepend(const RegionPieces& p) {
    prepend_pending(ahead_pending, ahead_set_off, ahead, p.ahead, p.ahead_pending, p.ahead_sets_off);
    ahead.prepend(p.ahead);
    forward.prepend(p.forward);
    if (p.sets_off) {
      folded_pending = folded;
      folded_pending.prepend_around(p.recompute_pending, p.backward);
      set_off = true;
    } else {
      folded_pending.prepend_around(p.recompute, p.backward);
    }
    folded.prepend_around(p.recompute, p.backward);
  }
  // The region's recomputation and backward: the work run ahead, then the
  // rest folded; with pending work waiting as it starts, `pending` (then
  // whether it ran: sets_off()).
  Run backward(bool pending) const {
    const Run& first = pending ? ahead_pending : ahead;
    const Run& then = pending && !ahead_set_off ? folded_pending : folded;
    Run run = then;
    run.peak = std::max(first.peak, first.sum + then.peak);
    run.sum += first.sum;
    return run;
  }
  bool sets_off() const { return ahead_set_off || set_off; }
  auto operator<=>(const RegionSums&) const = default;
};

// One stage of an inner region in one class: its original forward, its
// run in the enclosing region's recomputation (not saving), and its
// recomputation (saving) and backward inside the inner region.
struct InnerStageEffects {
  Piece forward, outer_recompute, recompute, backward;
  std::int64_t released_at_end = 0;  // held outputs released when the inner region ends
  // The enclosing region's recomputation with pending work waiting, as
  // RegionPieces. The inner region's own
  // recomputation never runs it: the enclosing one ran the same ops first.
  Piece outer_recompute_pending = {};
  bool sets_off = false;
};

// Stages u..d of an inner region [c0, d] in one class: the original
// forward and the enclosing region's recomputation in absolute form, the
// inner recomputation and its backward folded, and the held outputs as a
// negative sum (the bytes they give back).
struct InnerSums {
  Run forward, outer_recompute, folded;
  std::int64_t minus_held = 0;
  // outer_recompute with the pending work waiting as stage u's
  // part starts, as in RegionSums.
  Run outer_recompute_pending;
  bool set_off = false;
  void prepend(const InnerStageEffects& e) {
    forward.prepend(e.forward);
    prepend_pending(outer_recompute_pending, set_off, outer_recompute, e.outer_recompute, e.outer_recompute_pending,
                    e.sets_off);
    outer_recompute.prepend(e.outer_recompute);
    folded.prepend_around(e.recompute, e.backward);
    minus_held -= e.released_at_end;
  }
  auto operator<=>(const InnerSums&) const = default;
};

}  // namespace actmem::detail

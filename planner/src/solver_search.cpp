#include "solver_search.h"

#include <algorithm>
#include <array>
#include <deque>
#include <initializer_list>
#include <limits>
#include <map>
#include <tuple>

#include "actmem/simulator.h"

namespace actmem::detail {
namespace {

// "No segment yet" for the max-accumulators; far from overflow when added to.
constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min() / 4;

// A choice made for the chain: a plain stage or a region, with its blocks.
struct Segment {
  Region region;                     // from..to; a region when is_region
  bool is_region = false;
  std::vector<std::int64_t> blocks;  // per stage from..to
};

// A partial plan's segments, as a link to the segments to its right.
struct Trail {
  const Segment* segment = nullptr;  // owned by the search (stable address)
  int next = -1;                     // the trail to the right, -1: none
};

// A label's values: at most 3 classes × 4 accumulators, kept inline.
struct Values {
  std::array<std::int64_t, 12> a{};
  std::size_t n = 0;
  void add(std::initializer_list<std::int64_t> values) {
    for (std::int64_t x : values) a[n++] = x;
  }
  std::size_t size() const { return n; }
  std::int64_t& operator[](std::size_t i) { return a[i]; }
  const std::int64_t& operator[](std::size_t i) const { return a[i]; }
  friend bool operator<(const Values& x, const Values& y) {
    return std::lexicographical_compare(x.a.begin(), x.a.begin() + static_cast<std::ptrdiff_t>(x.n), y.a.begin(),
                                        y.a.begin() + static_cast<std::ptrdiff_t>(y.n));
  }
};

struct Label {
  Values v;  // per class: sum_f, q_f, sum_b, p_b (outer) or the inner accumulators
  double time_s = 0;
  int trail = -1;
  std::int64_t standalone_peak = 0;  // one class: peak_of() (Search::filter_outer())
};

// Dimensions compared for dominance: every `stride`-th group of values
// skips the positions in `skip` (totals that the label's bucket fixes: a
// forward total and a forward-plus-backward total are the same for every
// label of a bucket, so the backward total is not a free dimension).
struct Dims {
  std::size_t stride = 4;
  std::uint32_t skip = 0;  // bit i: position i of each group is not compared
};

bool dominates(const Label& a, const Label& b, const Dims& d) {
  if (a.time_s > b.time_s) return false;
  for (std::size_t i = 0; i < a.v.size(); ++i)
    if (!(d.skip & (1u << (i % d.stride))) && a.v[i] > b.v[i]) return false;
  return true;
}

// Keeps the labels no other label dominates (one of each equal group).
void pareto_filter(std::vector<Label>& labels, const Dims& d) {
  std::sort(labels.begin(), labels.end(), [](const Label& a, const Label& b) {
    if (a.time_s != b.time_s) return a.time_s < b.time_s;
    return a.v < b.v;
  });
  std::vector<Label> kept;
  for (Label& l : labels) {
    bool dominated = false;
    for (const Label& k : kept)
      if (dominates(k, l, d)) {
        dominated = true;
        break;
      }
    if (!dominated) kept.push_back(std::move(l));
  }
  labels = std::move(kept);
}

// Labels that share the gradients in flight at their left boundary.
struct Bucket {
  std::vector<GradState> grads;  // per class
  std::vector<Label> labels;
};
using Buckets = std::map<std::vector<std::int64_t>, Bucket>;

// One segment's memory effects in one class (solver_model.h Effect, folded).
struct SegmentEffect {
  std::int64_t forward_delta, forward_peak, backward_delta, backward_peak;
};

// Prefix-form accumulator pushed from the left: value = max over items of
// (bytes of items left of it + its peak) − total, so that total + q is the
// peak of the sequence.
void push_prefix(std::int64_t& sum, std::int64_t& q, std::int64_t delta, std::int64_t peak) {
  q = std::max(q, peak - (delta + sum));
  sum += delta;
}
// Suffix-form accumulator pushed from the left: p = max over items of
// (bytes of items right of it + its peak).
void push_suffix(std::int64_t& sum, std::int64_t& p, std::int64_t delta, std::int64_t peak) {
  p = std::max(p, sum + peak);
  sum += delta;
}

// Prefix accumulator in absolute form, pushed from the left: peak = max over
// items of (bytes of items left of it + its peak). Given the sum, the peak
// only grows with any item's bytes or peak.
void push_front(std::int64_t& sum, std::int64_t& peak, std::int64_t delta, std::int64_t item_peak) {
  peak = std::max(item_peak, delta + peak);
  sum += delta;
}

// A recomputation followed by its backward pass, folded, pushed from the
// left (a stage whose recomputation runs first and whose backward runs
// last): `sum` is both passes' bytes, `peak` the highest memory over both
// relative to their start. Given the sum, the peak only grows with any
// item's bytes or peaks.
void push_recompute_backward(std::int64_t& sum, std::int64_t& peak, std::int64_t recompute_delta,
                             std::int64_t recompute_peak, std::int64_t backward_delta, std::int64_t backward_peak) {
  peak = std::max({recompute_peak, recompute_delta + peak, recompute_delta + sum + backward_peak});
  sum += recompute_delta + backward_delta;
}

// Keeps the partial labels no other dominates in every value and time.
template <class P>
void dominance_filter(std::vector<P>& ps) {
  std::sort(ps.begin(), ps.end(), [](const P& x, const P& y) {
    if (x.time_s != y.time_s) return x.time_s < y.time_s;
    return x.v < y.v;
  });
  std::vector<P> kept;
  for (P& p : ps) {
    bool dominated = false;
    for (const P& q : kept) {
      bool all = true;
      for (std::size_t i = 0; i < p.v.size() && all; ++i) all = q.v[i] <= p.v[i];
      if (all) {
        dominated = true;
        break;
      }
    }
    if (!dominated) kept.push_back(std::move(p));
  }
  ps = std::move(kept);
}

// The same when the labels' values are equal but at positions i and j:
// by time, then a staircase of the kept (v[i] increasing, v[j] decreasing)
// answers "is one kept as good in both" in O(log n).
template <class P>
void dominance_filter_2d(std::vector<P>& ps, std::size_t i, std::size_t j) {
  std::sort(ps.begin(), ps.end(), [&](const P& x, const P& y) {
    return std::tie(x.time_s, x.v[i], x.v[j]) < std::tie(y.time_s, y.v[i], y.v[j]);
  });
  std::map<std::int64_t, std::int64_t> stair;
  std::vector<P> kept;
  for (P& p : ps) {
    auto it = stair.upper_bound(p.v[i]);
    if (it != stair.begin() && std::prev(it)->second <= p.v[j]) continue;
    for (it = stair.lower_bound(p.v[i]); it != stair.end() && it->second >= p.v[j];) it = stair.erase(it);
    stair[p.v[i]] = p.v[j];
    kept.push_back(std::move(p));
  }
  ps = std::move(kept);
}

// Of options (one per block count of a stage) with their boundary key,
// values (each only raising the final peak when it grows) and time: whether
// each is needed, i.e. no other with the same boundary is at least as good
// in every value and time (of equal ones, the first is kept).
std::vector<char> needed(const std::vector<std::vector<std::int64_t>>& keys,
                         const std::vector<std::vector<std::int64_t>>& values, const std::vector<double>& times) {
  std::vector<char> out(keys.size(), 1);
  auto as_good = [&](std::size_t j, std::size_t i) {
    if (keys[j] != keys[i] || times[j] > times[i]) return false;
    for (std::size_t v = 0; v < values[i].size(); ++v)
      if (values[j][v] > values[i][v]) return false;
    return true;
  };
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = 0; j < keys.size() && out[i]; ++j)
      if (j != i && out[j] && as_good(j, i) && (!as_good(i, j) || j < i)) out[i] = 0;
  return out;
}

class Search {
 public:
  Search(ChainModel& model, const SearchSpace& space)
      : m_(model), space_(space), n_(model.stage_count()), k_(model.class_count()), edges_(edges_per_stage(model.graph())) {}

  std::vector<Candidate> run() {
    for (int c = 0; c < k_; ++c) {
      GradState none;
      loss_forward_.push_back(m_.loss(c));
      loss_backward_.push_back(m_.loss(c, m_.signature(c, n_, none)));
    }
    std::vector<Buckets> at(static_cast<std::size_t>(n_ + 1));
    // Right end: after each class's loss backward.
    {
      Bucket start;
      Label l;
      for (int c = 0; c < k_; ++c) {
        GradState g;
        ChainModel::hand_over(m_.loss(c, m_.signature(c, n_, g)), g);
        start.grads.push_back(std::move(g));
        l.v.add({0, kNone, 0, kNone});
      }
      if (k_ == 1) l.standalone_peak = peak_of(l);
      start.labels.push_back(l);
      at[static_cast<std::size_t>(n_)][key(n_, start.grads)] = std::move(start);
    }
    for (int p = n_; p > 0; --p) {
      for (auto& [bkey, bucket] : at[static_cast<std::size_t>(p)]) {
        filter_outer(bucket.labels);
        const int b = p - 1;
        // A plain stage: its block counts, those dominated in every effect
        // (same bytes and gradients handed on, no lower peaks, no less
        // time) dropped first.
        {
          struct Option {
            std::int64_t blocks;
            std::vector<SegmentEffect> effects;
            std::vector<GradState> grads;
          };
          std::vector<Option> options;
          std::vector<std::vector<std::int64_t>> keys, peaks;
          std::vector<double> times;
          for (std::int64_t blocks : choices(b)) {
            Option o{blocks, {}, bucket.grads};
            std::vector<std::int64_t> k, v;
            for (int c = 0; c < k_; ++c) {
              const Effect& e = m_.plain(c, b, blocks, m_.signature(c, b, o.grads[static_cast<std::size_t>(c)]));
              ChainModel::hand_over(e, o.grads[static_cast<std::size_t>(c)]);
              o.effects.push_back({e.forward_delta, e.forward_peak, e.backward_delta, e.backward_peak});
              k.insert(k.end(), {e.forward_delta, e.backward_delta});
              v.insert(v.end(), {e.forward_peak, e.backward_peak});
            }
            const auto boundary = key(b, o.grads);
            k.insert(k.end(), boundary.begin(), boundary.end());
            keys.push_back(std::move(k));
            peaks.push_back(std::move(v));
            times.push_back(blocks > 1 ? m_.edge_forward_s(b) : 0.0);
            options.push_back(std::move(o));
          }
          const std::vector<char> keep = needed(keys, peaks, times);
          for (std::size_t i = 0; i < options.size(); ++i) {
            if (!keep[i]) continue;
            const Segment& plain = plain_segments_.emplace_back(Segment{{b, b, {}}, false, {options[i].blocks}});
            extend(at[static_cast<std::size_t>(b)], bucket, options[i].effects, options[i].grads, times[i], plain, b);
          }
        }
        // A region [a, b].
        for (int a = b; a >= 0; --a) regions(at[static_cast<std::size_t>(a)], bucket, a, b);
      }
    }
    // Left end: the whole step; evaluate the peak of every complete plan.
    std::vector<Candidate> out;
    for (auto& [bkey, bucket] : at[0]) {
      filter_outer(bucket.labels);
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

 private:
  std::vector<std::int64_t> key(int p, const std::vector<GradState>& grads) const {
    std::vector<std::int64_t> out;
    for (int c = 0; c < k_; ++c) {
      const auto part = m_.boundary(c, p, grads[static_cast<std::size_t>(c)]);
      out.insert(out.end(), part.begin(), part.end());
      out.push_back(-1);
    }
    return out;
  }

  std::vector<std::int64_t> choices(int s) const {
    const std::int64_t edges = edges_[static_cast<std::size_t>(s)];
    if (edges <= 0) return {1};
    std::vector<std::int64_t> out;
    for (std::int64_t b : space_.block_choices) {
      const std::int64_t capped = std::min(b, edges);
      if (std::find(out.begin(), out.end(), capped) == out.end()) out.push_back(capped);
    }
    return out;
  }

  // Adds `segment` (effects per class) to the left of every label of
  // `from` (filtered: filter_outer()), into the buckets of its left boundary
  // `a`. With one class, a label's standalone peak after the segment is
  // max(A, d + its peak before) for A and d fixed by the segment and the
  // bucket; the labels come by increasing time and decreasing peak, so once
  // two in a row give the same peak (A) every later one gives it too, more
  // slowly: dominated, not added.
  void extend(Buckets& into, const Bucket& from, const std::vector<SegmentEffect>& effects,
              const std::vector<GradState>& grads, double time_s, const Segment& segment, int a) {
    // The labels of a bucket share their sums, so they all land in one
    // bucket: its gradients in flight at a, and the sums after the segment.
    std::vector<std::int64_t> k = key(a, grads);
    const Values& sums = from.labels.front().v;
    for (int c = 0; c < k_; ++c) {
      const SegmentEffect& e = effects[static_cast<std::size_t>(c)];
      k.push_back(sums[static_cast<std::size_t>(4 * c)] + sums[static_cast<std::size_t>(4 * c + 2)] + e.forward_delta +
                  e.backward_delta);
    }
    auto it = into.find(k);
    if (it == into.end()) it = into.emplace(std::move(k), Bucket{grads, {}}).first;
    std::vector<Label>& labels = it->second.labels;
    fresh_.clear();
    std::int64_t previous_peak = kNone;
    for (const Label& l : from.labels) {
      Label x;
      x.v = l.v;
      for (int c = 0; c < k_; ++c) {
        const SegmentEffect& e = effects[static_cast<std::size_t>(c)];
        std::int64_t* v = &x.v[static_cast<std::size_t>(4 * c)];
        push_prefix(v[0], v[1], e.forward_delta, e.forward_peak);
        push_suffix(v[2], v[3], e.backward_delta, e.backward_peak);
      }
      x.time_s = l.time_s + time_s;
      x.trail = l.trail;  // the trail to the right, until the label is kept
      if (k_ == 1) {
        x.standalone_peak = peak_of(x);
        if (x.standalone_peak == previous_peak) break;
        previous_peak = x.standalone_peak;
      }
      fresh_.push_back(x);
    }
    if (k_ == 1) {
      merge_staircase(labels, segment);
      return;
    }
    for (Label& x : fresh_) {
      trail_.push_back({&segment, x.trail});
      x.trail = static_cast<int>(trail_.size()) - 1;
      labels.push_back(x);
    }
  }

  // One class: a bucket's labels are kept as a staircase, by increasing
  // time and decreasing standalone peak (what filter_outer() keeps), and
  // fresh_ (one too, made by adding `segment` on the left) is merged in;
  // the labels kept of it get their trails.
  void merge_staircase(std::vector<Label>& labels, const Segment& segment) {
    merged_.clear();
    std::int64_t least = std::numeric_limits<std::int64_t>::max();
    for (std::size_t i = 0, j = 0; i < labels.size() || j < fresh_.size();) {
      const bool take_fresh =
          i == labels.size() ||
          (j < fresh_.size() && (fresh_[j].time_s < labels[i].time_s ||
                                 (fresh_[j].time_s == labels[i].time_s && fresh_[j].standalone_peak < labels[i].standalone_peak)));
      Label& x = take_fresh ? fresh_[j++] : labels[i++];
      if (x.standalone_peak >= least) continue;
      least = x.standalone_peak;
      if (take_fresh) {
        trail_.push_back({&segment, x.trail});
        x.trail = static_cast<int>(trail_.size()) - 1;
      }
      merged_.push_back(x);
    }
    labels.swap(merged_);
  }

  // Outer values per class: sum_f, q_f, sum_b, p_b; buckets fix sum_f + sum_b.
  static constexpr Dims kOuter{4, 1u << 2};

  // Keeps the labels of a bucket that can still be optimal. With one step
  // class (rollout 1) a suffix S enters the final peak only through
  // F(P) + peak_of(S), F(P) being the forward bytes of the prefix P put to
  // its left, beside terms fixed by the bucket (its gradients in flight and
  // sum_f + sum_b); docs/solver.md "Why it is exact". So of two labels the
  // one no larger in peak_of and no slower dominates: a 1-D front, exact
  // for every budget. With several classes the prefix's bytes enter each
  // class's terms with different coefficients: the 4-value front per class.
  // With one class that front is kept as labels are added (extend(),
  // merge_staircase()).
  void filter_outer(std::vector<Label>& labels) {
    if (k_ != 1) pareto_filter(labels, kOuter);
  }
  // Region accumulators per class, in order: the original forward (sum,
  // peak) in absolute form (push_front), and the recomputation followed by
  // the backward, folded (push_recompute_backward: sum, peak). Buckets hold
  // equal gradients in flight and equal sums, so partials compare on the
  // two peaks (and time): the region's forward and backward peaks.
  static constexpr int kInner = 4;

  // Every way to run [a, b] as one region (block counts per stage, inner
  // regions), added to the left of `from`'s labels. The region's options
  // depend only on the gradients in flight at b + 1, so they are computed
  // once per (a, b, boundary) and reused for every bucket with it.
  void regions(Buckets& into, const Bucket& from, int a, int b) {
    auto cache_key = std::make_pair(std::make_pair(a, b), key(b + 1, from.grads));
    auto it = region_cache_.find(cache_key);
    if (it == region_cache_.end()) it = region_cache_.emplace(std::move(cache_key), region_options(from.grads, a, b)).first;
    for (const RegionGroup& group : it->second)
      for (const RegionOption& o : group.options) extend(into, from, o.effects, group.grads, o.time_s, o.segment, a);
  }

  struct RegionOption {
    std::vector<SegmentEffect> effects;  // per class
    double time_s = 0;
    Segment segment;
  };
  struct RegionGroup {
    std::vector<GradState> grads;  // in flight at a, per class
    std::vector<RegionOption> options;
  };

  // One piece of a region's executions: its memory change and local peak.
  struct Piece {
    std::int64_t delta = 0, peak = 0;
  };
  // An inner region [c0, d] of region [a, b] as one piece of each of the
  // region's three sequences, per class: the original forward, the
  // region's recomputation (the inner region keeps its inputs, saves
  // nothing), and the region's backward (the inner region's recomputation,
  // its backward, then its held outputs and kept inputs released).
  struct InnerUnit {
    std::vector<std::array<Piece, 3>> pieces;  // per class
    double time_s = 0;
    std::vector<std::int64_t> blocks;  // stages c0..d
  };
  struct InnerGroup {
    std::vector<GradState> grads;  // in flight at c0, per class
    std::vector<InnerUnit> units;
  };

  // Every way to run [c0, d] as an inner region of [a, b] (block counts per
  // stage) given the gradients in flight at d + 1: a dynamic program right
  // to left over its stages (values below). The piece's effects only grow
  // with each peak, so labels with the same gradients in flight and sums
  // are compared on the peaks and time.
  const std::vector<InnerGroup>& inner_units(int a, int b, int c0, int d, const std::vector<GradState>& grads) {
    // They depend on the region only through its bounds as seen from [c0, d].
    std::tie(a, b) = m_.norm_bounds(c0, d, a, b);
    auto cache_key = std::make_pair(std::array<int, 4>{a, b, c0, d}, key(d + 1, grads));
    if (auto it = inner_cache_.find(cache_key); it != inner_cache_.end()) return it->second;
    // Values per class: the original forward (sum, peak) and the region's
    // recomputation (sum, peak), in absolute form; the inner region's
    // recomputation and backward folded (sum, peak); minus the held
    // outputs. Buckets fix the sums, so labels compare on the peaks.
    constexpr std::size_t kW = 7;
    struct Partial {
      std::vector<std::int64_t> v;
      double time_s = 0;
      std::vector<std::int64_t> blocks;
    };
    struct IBucket {
      std::vector<GradState> grads;
      std::vector<Partial> partials;
    };
    const auto k = static_cast<std::size_t>(k_);
    auto filter = [](std::vector<Partial>& ps) { dominance_filter(ps); };
    std::map<std::vector<std::int64_t>, IBucket> cur;
    {
      IBucket start{grads, {}};
      Partial p;
      for (std::size_t c = 0; c < k; ++c) p.v.insert(p.v.end(), {0, kNone, 0, kNone, 0, kNone, 0});
      start.partials.push_back(std::move(p));
      cur.emplace(std::vector<std::int64_t>{}, std::move(start));
    }
    for (int u = d; u >= c0; --u) {
      std::map<std::vector<std::int64_t>, IBucket> next;
      for (auto& [bkey, ib] : cur) {
        filter(ib.partials);
        // Block counts of stage u, those dominated in every effect dropped.
        const std::vector<std::int64_t> options = choices(u);
        std::vector<std::vector<GradState>> gs;
        std::vector<std::vector<std::array<Effect, 3>>> es;
        std::vector<std::vector<std::int64_t>> keys, values;
        std::vector<double> times;
        for (std::int64_t blocks : options) {
          std::vector<GradState> g = ib.grads;
          std::vector<std::array<Effect, 3>> e(k);
          std::vector<std::int64_t> vals;
          for (int c = 0; c < k_; ++c) {
            auto& ec = e[static_cast<std::size_t>(c)];
            ec[0] = m_.region_forward(c, u, blocks, a);
            ec[1] = m_.recompute_in_inner(c, u, blocks, a, b, c0);
            ec[2] = m_.inner_recompute(c, u, blocks, c0, d, m_.signature(c, u, g[static_cast<std::size_t>(c)]));
            ChainModel::hand_over(ec[2], g[static_cast<std::size_t>(c)]);
            vals.insert(vals.end(), {ec[0].forward_delta, ec[0].forward_peak, ec[1].forward_delta, ec[1].forward_peak,
                                     ec[2].forward_delta, ec[2].forward_peak, ec[2].backward_delta, ec[2].backward_peak,
                                     -ec[2].released_at_end});
          }
          keys.push_back(key(u, g));
          values.push_back(std::move(vals));
          times.push_back(2 * m_.stage_forward_s(u) + (blocks > 1 ? m_.edge_forward_s(u) : 0.0));
          gs.push_back(std::move(g));
          es.push_back(std::move(e));
        }
        const std::vector<char> keep = needed(keys, values, times);
        for (std::size_t o = 0; o < options.size(); ++o) {
          if (!keep[o]) continue;
          const std::int64_t blocks = options[o];
          const std::vector<GradState>& g = gs[o];
          const auto& e = es[o];
          const std::vector<std::int64_t>& boundary = keys[o];
          const double time_s = times[o];
          for (const Partial& p : ib.partials) {
            Partial x = p;
            std::vector<std::int64_t> nk = boundary;
            for (std::size_t c = 0; c < k; ++c) {
              std::int64_t* v = &x.v[kW * c];
              const auto& ec = e[c];
              push_front(v[0], v[1], ec[0].forward_delta, ec[0].forward_peak);
              push_front(v[2], v[3], ec[1].forward_delta, ec[1].forward_peak);
              push_recompute_backward(v[4], v[5], ec[2].forward_delta, ec[2].forward_peak, ec[2].backward_delta,
                                      ec[2].backward_peak);
              v[6] -= ec[2].released_at_end;
              nk.insert(nk.end(), {v[0], v[2], v[4], v[6]});
            }
            x.time_s += time_s;
            x.blocks.insert(x.blocks.begin(), blocks);
            auto [it, inserted] = next.try_emplace(std::move(nk));
            if (inserted) it->second.grads = g;
            it->second.partials.push_back(std::move(x));
          }
        }
      }
      cur = std::move(next);
    }
    std::vector<std::int64_t> kept(k);
    for (int c = 0; c < k_; ++c) kept[static_cast<std::size_t>(c)] = m_.kept_bytes(c, c0, d, a, c0);
    std::map<std::vector<std::int64_t>, std::size_t> group_of;  // boundary at c0 -> index
    std::vector<InnerGroup> groups;
    for (auto& [bkey, ib] : cur) {
      filter(ib.partials);
      const std::vector<std::int64_t> boundary = key(c0, ib.grads);
      auto [git, inserted] = group_of.try_emplace(boundary, groups.size());
      if (inserted) groups.push_back({ib.grads, {}});
      InnerGroup& group = groups[git->second];
      for (Partial& p : ib.partials) {
        InnerUnit unit;
        for (std::size_t c = 0; c < k; ++c) {
          const std::int64_t* v = &p.v[kW * c];
          unit.pieces.push_back({Piece{v[0], v[1]}, Piece{v[2], v[3]}, Piece{v[4] + v[6] - kept[c], v[5]}});
        }
        unit.time_s = p.time_s;
        unit.blocks = std::move(p.blocks);
        group.units.push_back(std::move(unit));
      }
    }
    return inner_cache_[cache_key] = std::move(groups);
  }

  // Stage t as a plain child of a region [a, b]: per block count (those
  // dominated in every effect dropped), its pieces per class (original
  // forward, recomputation, backward) and the gradients in flight after it.
  struct ChildOption {
    std::int64_t blocks = 1;
    std::vector<std::array<Piece, 3>> pieces;  // per class
    std::vector<GradState> grads;              // in flight at t, per class
    double time_s = 0;
  };
  // They depend on the region only through the stage's context bounds and
  // the gradients in flight at t + 1, so they are computed once for those.
  const std::vector<ChildOption>& child_options(int t, int a, int b, const std::vector<GradState>& grads) {
    auto& by_boundary = child_cache_[{t, m_.norm_lo(t, a), m_.norm_hi(t, b)}];
    std::vector<std::int64_t> boundary = key(t + 1, grads);
    if (auto it = by_boundary.find(boundary); it != by_boundary.end()) return it->second;
    const std::vector<std::int64_t> options = choices(t);
    std::vector<ChildOption> all;
    std::vector<std::vector<std::int64_t>> keys, values;
    std::vector<double> times;
    for (std::int64_t blocks : options) {
      ChildOption o{blocks, {}, grads, m_.stage_forward_s(t) + (blocks > 1 ? m_.edge_forward_s(t) : 0.0)};
      std::vector<std::int64_t> vals;
      for (int c = 0; c < k_; ++c) {
        GradState& g = o.grads[static_cast<std::size_t>(c)];
        const Effect& f = m_.region_forward(c, t, blocks, a);
        const Effect& r = m_.recompute_plain(c, t, blocks, a, b, m_.signature(c, t, g));
        ChainModel::hand_over(r, g);
        o.pieces.push_back({Piece{f.forward_delta, f.forward_peak}, Piece{r.forward_delta, r.forward_peak},
                            Piece{r.backward_delta, r.backward_peak}});
        vals.insert(vals.end(), {f.forward_delta, f.forward_peak, r.forward_delta, r.forward_peak, r.backward_delta,
                                 r.backward_peak});
      }
      keys.push_back(key(t, o.grads));
      values.push_back(std::move(vals));
      times.push_back(o.time_s);
      all.push_back(std::move(o));
    }
    const std::vector<char> keep = needed(keys, values, times);
    std::vector<ChildOption> kept;
    for (std::size_t i = 0; i < all.size(); ++i)
      if (keep[i]) kept.push_back(std::move(all[i]));
    return by_boundary.emplace(std::move(boundary), std::move(kept)).first->second;
  }

  std::vector<RegionGroup> region_options(const std::vector<GradState>& grads, int a, int b) {
    // Inner DP right to left over the region's stages; partial labels carry
    // the block counts chosen so far (stages t..b) and inner regions.
    struct Partial {
      Values v;
      double time_s = 0;
      int link = -1;  // its pieces, leftmost first (links)
    };
    // A piece of the region: a plain stage's block count, or an inner
    // region with its block counts; linked to the pieces to its right.
    struct Link {
      std::int64_t blocks = 0;            // plain stage
      const InnerUnit* unit = nullptr;    // inner region `inner`
      Region inner;
      int next = -1;
    };
    std::vector<Link> links;
    struct InnerBucket {
      std::vector<GradState> grads;
      std::vector<Partial> partials;
    };
    std::vector<std::map<std::vector<std::int64_t>, InnerBucket>> at(static_cast<std::size_t>(b + 2));
    {
      InnerBucket start;
      start.grads = grads;
      Partial p;
      for (int c = 0; c < k_; ++c) p.v.add({0, kNone, 0, kNone});
      start.partials.push_back(std::move(p));
      at[static_cast<std::size_t>(b + 1)][key(b + 1, grads)] = std::move(start);
    }
    // One class: the sums are the bucket's, the two peaks are free.
    auto filter = [&](std::vector<Partial>& ps) {
      if (k_ == 1)
        dominance_filter_2d(ps, 1, 3);
      else
        dominance_filter(ps);
    };
    // Adds a piece (per class: original forward, recomputation forward,
    // backward) to the left of every partial of `ib`, into the bucket of
    // boundary `left`.
    auto add = [&](const InnerBucket& ib, const std::vector<std::array<Piece, 3>>& pieces,
                   const std::vector<GradState>& g, int left, double time_s, Link piece) {
      // The partials of a bucket share their sums: one destination bucket.
      std::vector<std::int64_t> k = key(left, g);
      for (int c = 0; c < k_; ++c) {
        const std::int64_t* v = &ib.partials.front().v[static_cast<std::size_t>(kInner * c)];
        const auto& pc = pieces[static_cast<std::size_t>(c)];
        k.insert(k.end(), {v[0] + pc[0].delta, v[2] + pc[1].delta + pc[2].delta});
      }
      auto it = at[static_cast<std::size_t>(left)].find(k);
      if (it == at[static_cast<std::size_t>(left)].end())
        it = at[static_cast<std::size_t>(left)].emplace(std::move(k), InnerBucket{g, {}}).first;
      for (const Partial& p : ib.partials) {
        Partial x = p;
        for (int c = 0; c < k_; ++c) {
          std::int64_t* v = &x.v[static_cast<std::size_t>(kInner * c)];
          const auto& pc = pieces[static_cast<std::size_t>(c)];
          push_front(v[0], v[1], pc[0].delta, pc[0].peak);
          push_recompute_backward(v[2], v[3], pc[1].delta, pc[1].peak, pc[2].delta, pc[2].peak);
        }
        x.time_s += time_s;
        piece.next = p.link;
        x.link = static_cast<int>(links.size());
        links.push_back(piece);
        it->second.partials.push_back(x);
      }
    };
    for (int t = b; t >= a; --t) {
      for (auto& [ikey, ib] : at[static_cast<std::size_t>(t + 1)]) {
        filter(ib.partials);
        for (const ChildOption& o : child_options(t, a, b, ib.grads))
          add(ib, o.pieces, o.grads, t, o.time_s, Link{o.blocks, nullptr, {}, -1});
        // An inner region [c0, t].
        if (!space_.nested_regions) continue;
        for (int c0 = t; c0 >= a; --c0) {
          const Region inner{c0, t, {}};
          for (const InnerGroup& group : inner_units(a, b, c0, t, ib.grads))
            for (const InnerUnit& unit : group.units)
              add(ib, unit.pieces, group.grads, c0, unit.time_s, Link{0, &unit, inner, -1});
        }
      }
    }
    // Close the region at a: per bucket (its partials filtered on the two
    // peaks per class and time, the sums being the bucket's), the region's
    // effects per class and its segment.
    std::vector<RegionGroup> groups;
    std::vector<std::int64_t> kept(static_cast<std::size_t>(k_));
    for (int c = 0; c < k_; ++c) kept[static_cast<std::size_t>(c)] = m_.kept_bytes(c, a, b, -1, a);
    for (auto& [ikey, ib] : at[static_cast<std::size_t>(a)]) {
      filter(ib.partials);
      RegionGroup group{ib.grads, {}};
      for (const Partial& p : ib.partials) {
        RegionOption ro;
        for (int c = 0; c < k_; ++c) {
          const std::int64_t* v = &p.v[static_cast<std::size_t>(kInner * c)];
          ro.effects.push_back({v[0], v[1], v[2] - kept[static_cast<std::size_t>(c)], v[3]});
        }
        ro.time_s = p.time_s;
        ro.segment = {{a, b, {}}, true, {}};
        for (int i = p.link; i >= 0; i = links[static_cast<std::size_t>(i)].next) {
          const Link& l = links[static_cast<std::size_t>(i)];
          if (!l.unit) {
            ro.segment.blocks.push_back(l.blocks);
            continue;
          }
          ro.segment.blocks.insert(ro.segment.blocks.end(), l.unit->blocks.begin(), l.unit->blocks.end());
          ro.segment.region.inner.push_back(l.inner);
        }
        group.options.push_back(std::move(ro));
      }
      groups.push_back(std::move(group));
    }
    return groups;
  }

  Plan plan_of(int trail) const {
    Plan plan = empty_plan(m_.graph().stages());
    for (int i = trail; i >= 0; i = trail_[static_cast<std::size_t>(i)].next) {
      const Segment& t = *trail_[static_cast<std::size_t>(i)].segment;
      for (int s = t.region.from; s <= t.region.to; ++s)
        plan.edge_blocks[static_cast<std::size_t>(s)] = t.blocks[static_cast<std::size_t>(s - t.region.from)];
      if (t.is_region) plan.checkpoints.push_back(t.region);
    }
    return plan;
  }

  // The step's peak from a complete label: rollout steps run forward in
  // order, then backward in reverse (solver_model.cpp predict()).
  std::int64_t peak_of(const Label& l) const {
    const int steps = m_.steps();
    std::int64_t mem = 0, peak = 0;
    auto v = [&](int c, int i) { return l.v[static_cast<std::size_t>(4 * c + i)]; };
    for (int step = 0; step < steps; ++step) {
      const int c = m_.class_of(step);
      const Effect& loss = loss_forward_[static_cast<std::size_t>(c)];
      peak = std::max(peak, mem + v(c, 0) + v(c, 1));
      mem += v(c, 0);
      peak = std::max(peak, mem + loss.forward_peak);
      mem += loss.forward_delta;
    }
    for (int step = 0; step < steps; ++step) mem += loss_forward_[static_cast<std::size_t>(m_.class_of(step))].backward_prelude;
    for (int step = steps - 1; step >= 0; --step) {
      const int c = m_.class_of(step);
      const Effect& loss = loss_backward_[static_cast<std::size_t>(c)];
      peak = std::max(peak, mem + loss.backward_peak);
      mem += loss.backward_delta;
      peak = std::max(peak, mem + v(c, 3));
      mem += v(c, 2);
    }
    peak = std::max(peak, mem);
    return m_.static_bytes() + peak;
  }

  ChainModel& m_;
  SearchSpace space_;
  int n_, k_;
  std::vector<std::int64_t> edges_;
  std::vector<Trail> trail_;
  std::vector<Label> fresh_, merged_;  // extend()'s scratch
  std::deque<Segment> plain_segments_;  // the plain-stage choices trails point to
  std::vector<Effect> loss_forward_, loss_backward_;  // per class: the loss stage, and its backward with no gradients in flight
  std::map<std::pair<std::pair<int, int>, std::vector<std::int64_t>>, std::vector<RegionGroup>> region_cache_;
  std::map<std::array<int, 3>, std::map<std::vector<std::int64_t>, std::vector<ChildOption>>> child_cache_;
  std::map<std::pair<std::array<int, 4>, std::vector<std::int64_t>>, std::vector<InnerGroup>> inner_cache_;
};

}  // namespace

std::vector<Candidate> search_frontier(ChainModel& model, const SearchSpace& space) {
  return Search(model, space).run();
}

}  // namespace actmem::detail

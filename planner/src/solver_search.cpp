#include "solver_search.h"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <limits>
#include <map>

#include "actmem/simulator.h"

namespace actmem::detail {
namespace {

// "No segment yet" for the max-accumulators; far from overflow when added to.
constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min() / 4;

// A choice made for the chain, linked to the choices to its right.
struct Trail {
  Region region;                     // from..to; a region when is_region
  bool is_region = false;
  std::vector<std::int64_t> blocks;  // per stage from..to
  int next = -1;                     // the segment to the right, -1: none
};

// A label's values: at most 3 classes × 6 accumulators, kept inline.
struct Values {
  std::array<std::int64_t, 18> a{};
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

class Search {
 public:
  Search(ChainModel& model, const SearchSpace& space)
      : m_(model), space_(space), n_(model.stage_count()), k_(model.class_count()), edges_(edges_per_stage(model.graph())) {}

  std::vector<Candidate> run() {
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
      start.labels.push_back(l);
      at[static_cast<std::size_t>(n_)][key(n_, start.grads)] = std::move(start);
    }
    for (int p = n_; p > 0; --p) {
      for (auto& [bkey, bucket] : at[static_cast<std::size_t>(p)]) {
        pareto_filter(bucket.labels, kOuter);
        const int b = p - 1;
        // A plain stage: its block counts, those not dominated first.
        {
          struct Option {
            std::int64_t blocks;
            std::vector<SegmentEffect> effects;
            std::vector<GradState> grads;
            std::vector<std::int64_t> key;
          };
          std::vector<Option> options;
          for (std::int64_t blocks : choices(b)) {
            Option o{blocks, {}, bucket.grads, {}};
            for (int c = 0; c < k_; ++c) {
              const Effect e = m_.plain(c, b, blocks, m_.signature(c, b, o.grads[static_cast<std::size_t>(c)]));
              ChainModel::hand_over(e, o.grads[static_cast<std::size_t>(c)]);
              o.effects.push_back({e.forward_delta, e.forward_peak, e.backward_delta, e.backward_peak});
              o.key.insert(o.key.end(), {e.forward_delta, e.backward_delta});
            }
            const auto boundary = key(b, o.grads);
            o.key.insert(o.key.end(), boundary.begin(), boundary.end());
            options.push_back(std::move(o));
          }
          auto worse = [&](const Option& x, const Option& y) {  // y at least as good as x
            if (x.key != y.key || (y.blocks > 1 && x.blocks == 1)) return false;
            for (int c = 0; c < k_; ++c) {
              const auto& ex = x.effects[static_cast<std::size_t>(c)];
              const auto& ey = y.effects[static_cast<std::size_t>(c)];
              if (ey.forward_peak > ex.forward_peak || ey.backward_peak > ex.backward_peak) return false;
            }
            return true;
          };
          for (std::size_t i = 0; i < options.size(); ++i) {
            bool dominated = false;
            for (std::size_t j = 0; j < options.size() && !dominated; ++j)
              dominated = j != i && worse(options[i], options[j]) && (!worse(options[j], options[i]) || j < i);
            if (dominated) continue;
            Trail t;
            t.region = {b, b, {}};
            t.blocks = {options[i].blocks};
            extend(at[static_cast<std::size_t>(b)], bucket, options[i].effects, options[i].grads,
                   options[i].blocks > 1 ? m_.edge_forward_s(b) : 0.0, t, b);
          }
        }
        // A region [a, b].
        for (int a = b; a >= 0; --a) regions(at[static_cast<std::size_t>(a)], bucket, a, b);
      }
    }
    // Left end: the whole step; evaluate the peak of every complete plan.
    std::vector<Candidate> out;
    for (auto& [bkey, bucket] : at[0]) {
      pareto_filter(bucket.labels, kOuter);
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

  // Adds segment `t` (effects per class) to the left of every label of
  // `from`, into the buckets of its left boundary `a`.
  void extend(Buckets& into, const Bucket& from, const std::vector<SegmentEffect>& effects,
              const std::vector<GradState>& grads, double time_s, Trail t, int a) {
    const std::vector<std::int64_t> boundary = key(a, grads);
    for (const Label& l : from.labels) {
      Label x;
      x.v = l.v;
      std::vector<std::int64_t> k = boundary;
      for (int c = 0; c < k_; ++c) {
        const SegmentEffect& e = effects[static_cast<std::size_t>(c)];
        std::int64_t* v = &x.v[static_cast<std::size_t>(4 * c)];
        push_prefix(v[0], v[1], e.forward_delta, e.forward_peak);
        push_suffix(v[2], v[3], e.backward_delta, e.backward_peak);
        k.push_back(v[0] + v[2]);
      }
      x.time_s = l.time_s + time_s;
      t.next = l.trail;
      x.trail = static_cast<int>(trail_.size());
      trail_.push_back(t);
      auto [it, inserted] = into.try_emplace(std::move(k));
      if (inserted) it->second.grads = grads;
      it->second.labels.push_back(std::move(x));
    }
  }

  // Outer values per class: sum_f, q_f, sum_b, p_b; buckets fix sum_f + sum_b.
  static constexpr Dims kOuter{4, 1u << 2};
  // Inner accumulators per class, in order: original forward (sum, q),
  // recomputation forward (sum, q), backward (sum, p); buckets fix the
  // original forward's sum and recomputation plus backward.
  static constexpr int kInner = 6;
  static constexpr Dims kInnerDims{6, (1u << 0) | (1u << 4)};

  // Every way to run [a, b] as one region (block counts per stage, inner
  // regions), added to the left of `from`'s labels.
  void regions(Buckets& into, const Bucket& from, int a, int b) {
    // Inner DP right to left over the region's stages; partial labels carry
    // the block counts chosen so far (stages t..b) and inner regions.
    struct Partial {
      Values v;
      double time_s = 0;
      std::vector<std::int64_t> blocks;  // stages t..b, left to right
      std::vector<Region> inner;         // sorted
    };
    struct InnerBucket {
      std::vector<GradState> grads;
      std::vector<Partial> partials;
    };
    std::vector<std::map<std::vector<std::int64_t>, InnerBucket>> at(static_cast<std::size_t>(b + 2));
    {
      InnerBucket start;
      start.grads = from.grads;
      Partial p;
      for (int c = 0; c < k_; ++c) p.v.add({0, kNone, 0, kNone, 0, kNone});
      start.partials.push_back(std::move(p));
      at[static_cast<std::size_t>(b + 1)][key(b + 1, from.grads)] = std::move(start);
    }
    auto filter = [](std::vector<Partial>& ps) {
      std::vector<Label> ls;
      for (std::size_t i = 0; i < ps.size(); ++i) ls.push_back({ps[i].v, ps[i].time_s, static_cast<int>(i)});
      pareto_filter(ls, kInnerDims);
      std::vector<Partial> kept;
      for (const Label& l : ls) kept.push_back(std::move(ps[static_cast<std::size_t>(l.trail)]));
      ps = std::move(kept);
    };
    for (int t = b; t >= a; --t) {
      for (auto& [ikey, ib] : at[static_cast<std::size_t>(t + 1)]) {
        filter(ib.partials);
        for (std::int64_t blocks : choices(t)) {
          std::vector<GradState> grads = ib.grads;
          std::vector<Effect> fwd, rec;
          for (int c = 0; c < k_; ++c) {
            fwd.push_back(m_.region_forward(c, t, blocks, a));
            rec.push_back(m_.recompute_plain(c, t, blocks, a, b, m_.signature(c, t, grads[static_cast<std::size_t>(c)])));
            ChainModel::hand_over(rec.back(), grads[static_cast<std::size_t>(c)]);
          }
          const std::vector<std::int64_t> boundary = key(t, grads);
          const double time_s = m_.stage_forward_s(t) + (blocks > 1 ? m_.edge_forward_s(t) : 0.0);
          for (const Partial& p : ib.partials) {
            Partial x = p;
            std::vector<std::int64_t> k = boundary;
            for (int c = 0; c < k_; ++c) {
              std::int64_t* v = &x.v[static_cast<std::size_t>(kInner * c)];
              const Effect& f = fwd[static_cast<std::size_t>(c)];
              const Effect& r = rec[static_cast<std::size_t>(c)];
              push_prefix(v[0], v[1], f.forward_delta, f.forward_peak);
              push_prefix(v[2], v[3], r.forward_delta, r.forward_peak);
              push_suffix(v[4], v[5], r.backward_delta, r.backward_peak);
              k.push_back(v[0]);
              k.push_back(v[2] + v[4]);
            }
            x.time_s += time_s;
            x.blocks.insert(x.blocks.begin(), blocks);
            auto [it, inserted] = at[static_cast<std::size_t>(t)].try_emplace(std::move(k));
            if (inserted) it->second.grads = grads;
            it->second.partials.push_back(std::move(x));
          }
        }
      }
    }
    // Close the region at a: per bucket, the region's effects per class;
    // only forward and backward peaks still differ between its options
    // (the totals are the bucket's), so keep those not dominated in
    // (peaks, time) before pairing them with the labels to the right.
    std::vector<std::int64_t> kept(static_cast<std::size_t>(k_));
    for (int c = 0; c < k_; ++c) kept[static_cast<std::size_t>(c)] = m_.kept_bytes(c, a, b, -1, a);
    for (auto& [ikey, ib] : at[static_cast<std::size_t>(a)]) {
      std::vector<Label> options;
      std::vector<std::vector<SegmentEffect>> effects;
      for (std::size_t i = 0; i < ib.partials.size(); ++i) {
        const Partial& p = ib.partials[i];
        std::vector<SegmentEffect> e;
        Label o;
        for (int c = 0; c < k_; ++c) {
          const std::int64_t* v = &p.v[static_cast<std::size_t>(kInner * c)];
          e.push_back({v[0], v[0] + v[1], v[2] + v[4] - kept[static_cast<std::size_t>(c)], std::max(v[2] + v[3], v[2] + v[5])});
          o.v.add({e.back().forward_peak, e.back().backward_peak});
        }
        o.time_s = p.time_s;
        o.trail = static_cast<int>(i);
        options.push_back(std::move(o));
        effects.push_back(std::move(e));
      }
      pareto_filter(options, Dims{2, 0});
      for (const Label& o : options) {
        const Partial& p = ib.partials[static_cast<std::size_t>(o.trail)];
        Trail t;
        t.region = {a, b, p.inner};
        t.is_region = true;
        t.blocks = p.blocks;
        extend(into, from, effects[static_cast<std::size_t>(o.trail)], ib.grads, p.time_s, t, a);
      }
    }
  }

  Plan plan_of(int trail) const {
    Plan plan = empty_plan(m_.graph().stages());
    for (int i = trail; i >= 0; i = trail_[static_cast<std::size_t>(i)].next) {
      const Trail& t = trail_[static_cast<std::size_t>(i)];
      for (int s = t.region.from; s <= t.region.to; ++s)
        plan.edge_blocks[static_cast<std::size_t>(s)] = t.blocks[static_cast<std::size_t>(s - t.region.from)];
      if (t.is_region) plan.checkpoints.push_back(t.region);
    }
    return plan;
  }

  // The step's peak from a complete label: rollout steps run forward in
  // order, then backward in reverse (solver_model.cpp predict()).
  std::int64_t peak_of(const Label& l) {
    const int steps = m_.steps();
    std::int64_t mem = 0, peak = 0;
    auto v = [&](int c, int i) { return l.v[static_cast<std::size_t>(4 * c + i)]; };
    for (int step = 0; step < steps; ++step) {
      const int c = m_.class_of(step);
      const Effect loss = m_.loss(c);
      peak = std::max(peak, mem + v(c, 0) + v(c, 1));
      mem += v(c, 0);
      peak = std::max(peak, mem + loss.forward_peak);
      mem += loss.forward_delta;
    }
    for (int step = 0; step < steps; ++step) mem += m_.loss(m_.class_of(step)).backward_prelude;
    GradState none;
    for (int step = steps - 1; step >= 0; --step) {
      const int c = m_.class_of(step);
      const Effect loss = m_.loss(c, m_.signature(c, m_.stage_count(), none));
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
};

}  // namespace

std::vector<Candidate> search_frontier(ChainModel& model, const SearchSpace& space) {
  return Search(model, space).run();
}

}  // namespace actmem::detail

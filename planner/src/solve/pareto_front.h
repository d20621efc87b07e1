#pragma once
// The Pareto-front toolkit of the solver's three label programs: the chain
// (solver_search.cpp), region (region_program.h) and inner-region
// (inner_region_program.h) programs.
//
// A label is a partial plan with `sums` (a type with a lexicographic
// operator<) and `time_s`. Each program says which values of a label decide
// the final peak, given what its bucket fixes (the final peak never
// decreases in any of them). A label is dominated when another is no worse
// in those values and no slower; a dominated label is never needed
// (docs/solver.md "Why it is exact").

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <vector>

#include "solve/solver_model.h"
#include "solve/suffix_sums.h"

namespace actmem::detail {

// Gradients in flight at a boundary, one state per rollout-step class.
using ClassGrads = std::vector<GradState>;

// Labels that share the gradients in flight at their left boundary and the
// sums their bucket key fixes.
template <class Label>
struct Bucket {
  ClassGrads grads;
  std::vector<Label> labels;
};
// Buckets by key: the boundary key (SearchContext::boundary_key()), then
// the sums the bucket fixes. Iterated in key order.
template <class Label>
using Buckets = std::map<std::vector<std::int64_t>, Bucket<Label>>;

// Keeps the labels no other dominates: those no other is as good as in
// every value of worth(label) (a std::array of the values the final peak
// never decreases in that the labels can differ in) and no slower. Of an
// equal group the first by (time, worth, sums) is kept; afterwards the
// labels are in that order.
template <class Label, class Worth>
void keep_pareto_front(std::vector<Label>& labels, Worth worth) {
  if (labels.size() < 2) return;
  using Key = decltype(worth(labels.front()));
  struct Entry {
    Key key;
    std::size_t label;
  };
  std::vector<Entry> entries;
  entries.reserve(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) entries.push_back({worth(labels[i]), i});
  std::sort(entries.begin(), entries.end(), [&](const Entry& x, const Entry& y) {
    const Label &lx = labels[x.label], &ly = labels[y.label];
    if (lx.time_s != ly.time_s) return lx.time_s < ly.time_s;
    if (x.key != y.key) return x.key < y.key;
    return lx.sums < ly.sums;
  });
  auto no_worse = [](const Key& k, const Key& l) {
    for (std::size_t d = 0; d < k.size(); ++d)
      if (k[d] > l[d]) return false;
    return true;
  };
  // The kept entries move to the front of `entries`, in order. Every kept
  // label comes first in time order: no slower.
  std::size_t kept = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto end = entries.begin() + static_cast<std::ptrdiff_t>(kept);
    if (std::any_of(entries.begin(), end, [&](const Entry& k) { return no_worse(k.key, entries[i].key); })) continue;
    entries[kept++] = entries[i];
  }
  std::vector<Label> front;
  front.reserve(kept);
  for (std::size_t i = 0; i < kept; ++i) front.push_back(std::move(labels[entries[i].label]));
  labels = std::move(front);
}

// A worth for keep_pareto_front(): the N values values_of(c) gives for each
// class c < `classes`, side by side (zero for classes beyond).
template <std::size_t N, class ValuesOf>
std::array<std::int64_t, N * kMaxClasses> class_values(int classes, ValuesOf values_of) {
  std::array<std::int64_t, N * kMaxClasses> out{};
  for (std::size_t c = 0; c < kMaxClasses && c < static_cast<std::size_t>(classes); ++c) {
    const std::array<std::int64_t, N> values = values_of(static_cast<int>(c));
    for (std::size_t v = 0; v < N; ++v) out[c * N + v] = values[v];
  }
  return out;
}

// The same front when the labels' sums can differ only in the two values
// x(sums) and y(sums): by time, then a staircase of the kept (x increasing,
// y decreasing) answers "is one kept as good in both" in O(log n).
template <class Label, class X, class Y>
void keep_pareto_front_2d(std::vector<Label>& labels, X x, Y y) {
  // Sorted by index: labels are large, and most are dropped.
  struct Entry {
    double time_s;
    std::int64_t x, y;
    std::size_t label;
  };
  std::vector<Entry> entries;
  entries.reserve(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i)
    entries.push_back({labels[i].time_s, x(labels[i].sums), y(labels[i].sums), i});
  std::sort(entries.begin(), entries.end(), [](const Entry& l, const Entry& r) {
    if (l.time_s != r.time_s) return l.time_s < r.time_s;
    if (l.x != r.x) return l.x < r.x;
    if (l.y != r.y) return l.y < r.y;
    return l.label < r.label;
  });
  std::map<std::int64_t, std::int64_t> stair;  // x -> least y of the kept with that x or less
  std::vector<Label> kept;
  for (const Entry& e : entries) {
    auto it = stair.upper_bound(e.x);
    if (it != stair.begin() && std::prev(it)->second <= e.y) continue;
    for (it = stair.lower_bound(e.x); it != stair.end() && it->second >= e.y;) it = stair.erase(it);
    stair[e.x] = e.y;
    kept.push_back(std::move(labels[e.label]));
  }
  labels = std::move(kept);
}

// A 1-D front: labels by increasing time and strictly decreasing value().
// Merges `fresh` (such a front too) into `front`, keeping the labels of
// both that no other beats; of a tie in time and value the one of `front`.
// on_kept_fresh(label) is called for each label of `fresh` kept, before it
// is moved in. `scratch` is working space.
template <class Label, class Value, class OnKeptFresh>
void merge_staircases(std::vector<Label>& front, std::vector<Label>& fresh, std::vector<Label>& scratch, Value value,
                      OnKeptFresh on_kept_fresh) {
  scratch.clear();
  auto before = [&](const Label& x, const Label& y) {
    return x.time_s < y.time_s || (x.time_s == y.time_s && value(x) < value(y));
  };
  std::int64_t least = std::numeric_limits<std::int64_t>::max();  // the least value kept so far
  for (std::size_t i = 0, j = 0; i < front.size() || j < fresh.size();) {
    const bool take_fresh = i == front.size() || (j < fresh.size() && before(fresh[j], front[i]));
    Label& l = take_fresh ? fresh[j++] : front[i++];
    if (value(l) >= least) continue;
    least = value(l);
    if (take_fresh) on_kept_fresh(l);
    scratch.push_back(std::move(l));
  }
  front.swap(scratch);
}

// A step of a program offers options (one per block count of a stage).
// Those with equal `same` (bytes, gradients handed on) compare on `costs`
// (each only raising the final peak as it grows) and time.
struct OptionCosts {
  std::vector<std::int64_t> same;
  std::vector<std::int64_t> costs;
  double time_s = 0;
};

// Whether each option is needed: no other with the same `same` is as good
// in every cost and time (of equal ones, the first is kept).
inline std::vector<char> needed_options(const std::vector<OptionCosts>& options) {
  std::vector<char> out(options.size(), 1);
  auto as_good = [&](std::size_t j, std::size_t i) {
    const OptionCosts &oj = options[j], &oi = options[i];
    if (oj.same != oi.same || oj.time_s > oi.time_s) return false;
    for (std::size_t v = 0; v < oi.costs.size(); ++v)
      if (oj.costs[v] > oi.costs[v]) return false;
    return true;
  };
  for (std::size_t i = 0; i < options.size(); ++i)
    for (std::size_t j = 0; j < options.size() && out[i]; ++j)
      if (j != i && out[j] && as_good(j, i) && (!as_good(i, j) || j < i)) out[i] = 0;
  return out;
}

// The options needed_options() keeps, in their order; costs[i] are
// options[i]'s.
template <typename Option>
std::vector<Option> keep_needed(std::vector<Option> options, const std::vector<OptionCosts>& costs) {
  const std::vector<char> keep = needed_options(costs);
  std::vector<Option> kept;
  for (std::size_t i = 0; i < options.size(); ++i)
    if (keep[i]) kept.push_back(std::move(options[i]));
  return kept;
}

}  // namespace actmem::detail

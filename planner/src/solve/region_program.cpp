#include "solve/region_program.h"

#include <algorithm>
#include <array>

namespace actmem::detail {

const std::vector<RegionGroup>& RegionProgram::options(int a, int b, const ClassGrads& grads_after, bool pending) {
  // The options depend only on the gradients in flight at b + 1.
  auto cache_key = std::make_pair(std::array<int, 3>{a, b, pending ? 1 : 0}, ctx_.boundary_key(b + 1, grads_after));
  auto it = cache_.find(cache_key);
  if (it == cache_.end()) it = cache_.emplace(std::move(cache_key), solve(a, b, grads_after, pending)).first;
  return it->second;
}

// The program over b..a (table.at[t]: labels over stages t..b), closed at a.
std::vector<RegionGroup> RegionProgram::solve(int a, int b, const ClassGrads& grads_after, bool pending) {
  Table table{a, b, pending, std::vector<Buckets<Label>>(static_cast<std::size_t>(b + 2)), {}};
  Label start;
  for (int c = 0; c < ctx_.classes(); ++c) start.sums.push_back({});
  Buckets<Label>& right_end = table.at[static_cast<std::size_t>(b + 1)];
  right_end[ctx_.boundary_key(b + 1, grads_after)] = Bucket<Label>{grads_after, {start}};
  for (int t = b; t >= a; --t)
    for (auto& [key, bucket] : table.at[static_cast<std::size_t>(t + 1)]) {
      keep_front(bucket.labels, pending);
      extend_from(table, t, bucket);
    }
  return close(table);
}

// A bucket's labels share their sums, so they compare on the two peaks per
// class and time; with one class a 2-D front. On their work run ahead's
// peak too where it differs; pending, also on the recomputation
// and backward folded, and the work run ahead, with pending work waiting.
void RegionProgram::keep_front(std::vector<Label>& labels, bool pending) const {
  if (pending) {
    keep_pareto_front(labels, [&](const Label& l) {
      return class_values<5>(ctx_.classes(), [&](int c) {
        const RegionSums& s = l.sums[c];
        return std::array{s.forward.peak, s.folded.peak, s.folded_pending.peak, s.ahead.peak, s.ahead_pending.peak};
      });
    });
    return;
  }
  // Labels whose work run ahead peaks alike compare on the other two.
  const bool ahead_alike = std::all_of(labels.begin(), labels.end(), [&](const Label& l) {
    for (int c = 0; c < ctx_.classes(); ++c)
      if (l.sums[c].ahead.peak != labels.front().sums[c].ahead.peak) return false;
    return true;
  });
  if (!ahead_alike) {
    keep_pareto_front(labels, [&](const Label& l) {
      return class_values<3>(ctx_.classes(), [&](int c) {
        return std::array{l.sums[c].forward.peak, l.sums[c].folded.peak, l.sums[c].ahead.peak};
      });
    });
    return;
  }
  if (ctx_.classes() == 1) {
    keep_pareto_front_2d(
        labels, [](const PerClass<RegionSums>& s) { return s[0].forward.peak; },
        [](const PerClass<RegionSums>& s) { return s[0].folded.peak; });
    return;
  }
  keep_pareto_front(labels, [&](const Label& l) {
    return class_values<2>(ctx_.classes(), [&](int c) {
      return std::array{l.sums[c].forward.peak, l.sums[c].folded.peak};
    });
  });
}

// Puts every piece that ends at stage t left of `from`'s labels (covering
// t + 1..b): stage t as a plain child, then each inner region [c0, t].
void RegionProgram::extend_from(Table& table, int t, const Bucket<Label>& from) {
  for (const ChildOption& o : child_options(t, table.a, table.b, from.grads, table.pending))
    add(table, from, o.pieces, o.grads, t, o.time_s, Part{o.blocks, nullptr, {}, -1});
  if (!ctx_.nested_regions()) return;
  for (int c0 = t; c0 >= table.a; --c0) {
    const Region inner{c0, t, {}};
    for (const InnerGroup& group : inner_.units(table.a, table.b, c0, t, from.grads, table.pending))
      for (const InnerUnit& unit : group.units)
        add(table, from, unit.pieces, group.grads, c0, unit.time_s, Part{0, &unit, inner, -1});
  }
}

// Puts a piece (covering left..) left of every label of `from`, into the
// bucket at `left` of its boundary and the labels' new sums (the labels of
// a bucket share their sums, so all land in one bucket).
void RegionProgram::add(Table& table, const Bucket<Label>& from, const PerClass<RegionPieces>& pieces,
                        const ClassGrads& grads, int left, double time_s, Part part) {
  std::vector<std::int64_t> key = ctx_.boundary_key(left, grads);
  for (int c = 0; c < ctx_.classes(); ++c) {
    RegionSums next = from.labels.front().sums[c];  // the sums every label gets
    next.prepend(pieces[c]);
    key.insert(key.end(), {next.forward.sum, next.folded.sum, next.ahead.sum});
    if (table.pending)
      key.insert(key.end(),
                 {next.folded_pending.sum, next.set_off ? 1 : 0, next.ahead_pending.sum, next.ahead_set_off ? 1 : 0});
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
// bytes (the folded sum less the inputs the region keeps to its end: not
// those let go at their last reader, J37) and peak.
std::vector<RegionGroup> RegionProgram::close(Table& table) {
  std::vector<std::int64_t> kept;  // per class
  for (int c = 0; c < ctx_.classes(); ++c)
    kept.push_back(ctx_.model().kept_bytes(c, table.a, table.b, -1, table.a) -
                   ctx_.model().released_before_end(c, table.a, table.b, -1, table.a));
  std::vector<RegionGroup> groups;
  for (auto& [key, bucket] : table.at[static_cast<std::size_t>(table.a)]) {
    keep_front(bucket.labels, table.pending);
    RegionGroup group{bucket.grads, {}};
    for (const Label& label : bucket.labels) {
      RegionOption o;
      for (int c = 0; c < ctx_.classes(); ++c) {
        const RegionSums& s = label.sums[c];
        const Run backward = s.backward(table.pending);
        const std::int64_t backward_bytes = backward.sum - kept[static_cast<std::size_t>(c)];
        o.effects.push_back({{s.forward.sum, s.forward.peak}, {backward_bytes, backward.peak}});
        o.sets_off = o.sets_off || (table.pending && s.sets_off());
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
                                                                            const ClassGrads& grads_after,
                                                                            bool pending) {
  ChainModel& m = ctx_.model();
  auto& by_boundary = child_cache_[{t, m.norm_lo(t, a), m.norm_hi(t, b), pending ? 1 : 0}];
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
      const std::vector<std::int64_t> in = m.signature(c, t, g);
      const Effect& r = m.recompute_plain(c, t, blocks, a, b, in);
      const Effect& rp = pending ? m.recompute_plain(c, t, blocks, a, b, in, true) : r;
      ChainModel::hand_over(r, g);
      const RegionPieces p{{f.forward_delta, f.forward_peak},
                           {r.forward_delta, r.forward_peak},
                           {r.backward_delta, r.backward_peak},
                           {rp.forward_delta, rp.forward_peak},
                           rp.ran_pending,
                           {r.ahead_delta, r.ahead_peak},
                           {rp.ahead_delta, rp.ahead_peak},
                           rp.ahead_ran_pending};
      o.pieces.push_back(p);
      cost.costs.insert(cost.costs.end(),
                        {p.forward.delta, p.forward.peak, p.recompute.delta, p.recompute.peak, p.backward.delta,
                         p.backward.peak, p.recompute_pending.delta, p.recompute_pending.peak, p.ahead.delta,
                         p.ahead.peak, p.ahead_pending.delta, p.ahead_pending.peak});
      cost.same.push_back(p.sets_off ? 1 : 0);
      cost.same.push_back(p.ahead_sets_off ? 1 : 0);
    }
    const std::vector<std::int64_t> boundary_at_t = ctx_.boundary_key(t, o.grads);
    cost.same.insert(cost.same.end(), boundary_at_t.begin(), boundary_at_t.end());
    cost.time_s = o.time_s;
    costs.push_back(std::move(cost));
    options.push_back(std::move(o));
  }
  return by_boundary.emplace(std::move(boundary), keep_needed(std::move(options), costs)).first->second;
}

}  // namespace actmem::detail

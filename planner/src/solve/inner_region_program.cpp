#include "solve/inner_region_program.h"

#include <array>
#include <tuple>
#include <utility>

namespace actmem::detail {

const std::vector<InnerGroup>& InnerRegionProgram::units(int a, int b, int c0, int d, const ClassGrads& grads_after,
                                                         bool pending) {
  // The units depend on the region only through its bounds as seen from [c0, d].
  std::tie(a, b) = ctx_.model().norm_bounds(c0, d, a, b);
  const Bounds r{a, b, c0, d, pending};
  auto cache_key =
      std::make_pair(std::array<int, 5>{a, b, c0, d, pending ? 1 : 0}, ctx_.boundary_key(d + 1, grads_after));
  if (auto it = cache_.find(cache_key); it != cache_.end()) return it->second;
  Buckets<Label> at;  // at boundary u + 1, then u
  Label start;
  for (int c = 0; c < ctx_.classes(); ++c) start.sums.push_back({});
  at.emplace(std::vector<std::int64_t>{}, Bucket<Label>{grads_after, {start}});
  for (int u = d; u >= c0; --u) {
    Buckets<Label> next;
    for (auto& [key, bucket] : at) {
      keep_front(bucket.labels, pending);
      for (const StageOption& option : stage_options(r, u, bucket.grads)) extend(next, bucket.labels, option, pending);
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
      const Effect& outer_pending = r.pending ? m.recompute_in_inner(c, u, blocks, r.a, r.b, r.c0, true) : outer;
      const Effect& inner = m.inner_recompute(c, u, blocks, r.c0, r.d, m.signature(c, u, g));
      ChainModel::hand_over(inner, g);
      const InnerStageEffects e{{forward.forward_delta, forward.forward_peak},
                                {outer.forward_delta, outer.forward_peak},
                                {inner.forward_delta, inner.forward_peak},
                                {inner.backward_delta, inner.backward_peak},
                                inner.released_at_end,
                                {outer_pending.forward_delta, outer_pending.forward_peak},
                                outer_pending.ran_pending};
      o.effects.push_back(e);
      cost.costs.insert(cost.costs.end(),
                        {e.forward.delta, e.forward.peak, e.outer_recompute.delta, e.outer_recompute.peak,
                         e.recompute.delta, e.recompute.peak, e.backward.delta, e.backward.peak, -e.released_at_end,
                         e.outer_recompute_pending.delta, e.outer_recompute_pending.peak});
      cost.same.push_back(e.sets_off ? 1 : 0);
    }
    o.boundary = ctx_.boundary_key(u, o.grads);
    cost.same.insert(cost.same.end(), o.boundary.begin(), o.boundary.end());
    cost.time_s = o.time_s;
    costs.push_back(std::move(cost));
    options.push_back(std::move(o));
  }
  return keep_needed(std::move(options), costs);
}

// Puts `option`'s stage left of every label, into the bucket of its
// boundary and the labels' new sums.
void InnerRegionProgram::extend(Buckets<Label>& into, const std::vector<Label>& labels, const StageOption& option,
                                bool pending) {
  for (const Label& label : labels) {
    Label x = label;
    std::vector<std::int64_t> key = option.boundary;
    for (int c = 0; c < x.sums.size(); ++c) {
      InnerSums& s = x.sums[c];
      s.prepend(option.effects[c]);
      key.insert(key.end(), {s.forward.sum, s.outer_recompute.sum, s.folded.sum, s.minus_held});
      if (pending) key.insert(key.end(), {s.outer_recompute_pending.sum, s.set_off ? 1 : 0});
    }
    x.time_s += option.time_s;
    x.blocks.insert(x.blocks.begin(), option.blocks);
    auto [it, inserted] = into.try_emplace(std::move(key));
    if (inserted) it->second.grads = option.grads;
    it->second.labels.push_back(std::move(x));
  }
}

// A bucket's labels share their sums (extend() keys on them), so they
// compare on the three peaks per class and time; pending, on the
// enclosing recomputation's with pending work waiting too.
void InnerRegionProgram::keep_front(std::vector<Label>& labels, bool pending) const {
  if (pending) {
    keep_pareto_front(labels, [&](const Label& l) {
      return class_values<4>(ctx_.classes(), [&](int c) {
        const InnerSums& s = l.sums[c];
        return std::array{s.forward.peak, s.outer_recompute.peak, s.folded.peak, s.outer_recompute_pending.peak};
      });
    });
    return;
  }
  keep_pareto_front(labels, [&](const Label& l) {
    return class_values<3>(ctx_.classes(), [&](int c) {
      const InnerSums& s = l.sums[c];
      return std::array{s.forward.peak, s.outer_recompute.peak, s.folded.peak};
    });
  });
}

// The labels at c0 as units, grouped by the gradients in flight at c0.
std::vector<InnerGroup> InnerRegionProgram::close(const Bounds& r, Buckets<Label>& at_c0) const {
  std::vector<std::int64_t> kept;  // per class: the inputs the inner region keeps
  // and those of the enclosing region's that one of its stages alone reads,
  // which the enclosing region let go at its last reader (J37)
  for (int c = 0; c < ctx_.classes(); ++c)
    kept.push_back(ctx_.model().kept_bytes(c, r.c0, r.d, r.a, r.c0) +
                   ctx_.model().released_before_end(c, r.c0, r.d, -1, r.a));
  std::map<std::vector<std::int64_t>, std::size_t> group_of;  // boundary key at c0 -> index in groups
  std::vector<InnerGroup> groups;
  for (auto& [key, bucket] : at_c0) {
    keep_front(bucket.labels, r.pending);
    auto [git, inserted] = group_of.try_emplace(ctx_.boundary_key(r.c0, bucket.grads), groups.size());
    if (inserted) groups.push_back({bucket.grads, {}});
    InnerGroup& group = groups[git->second];
    for (Label& label : bucket.labels) {
      InnerUnit unit;
      for (int c = 0; c < label.sums.size(); ++c) {
        const InnerSums& s = label.sums[c];
        unit.pieces.push_back({{s.forward.sum, s.forward.peak},
                               {s.outer_recompute.sum, s.outer_recompute.peak},
                               {s.folded.sum + s.minus_held - kept[static_cast<std::size_t>(c)], s.folded.peak},
                               {s.outer_recompute_pending.sum, s.outer_recompute_pending.peak},
                               s.set_off});
      }
      unit.time_s = label.time_s;
      unit.blocks = std::move(label.blocks);
      group.units.push_back(std::move(unit));
    }
  }
  return groups;
}

}  // namespace actmem::detail

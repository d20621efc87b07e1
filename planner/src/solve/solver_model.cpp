#include "solve/solver_model.h"

#include <algorithm>
#include <stdexcept>

#include "actmem/simulate/simulator.h"
#include "cost/memory_profile.h"
#include "simulate/loop_baselines.h"
#include "simulate/step_costs.h"

namespace actmem::detail {
namespace {

enum Kind { kPlain, kRegionForward, kRecomputePlain, kRecomputeInInner, kInnerRecompute, kLoss };

}  // namespace

bool chain_model_covers_unstepped_plans(const CostGraph& graph) {
  const RunOptions& run = graph.run();
  return !memory_profile(run, graph.model().implementation)
              .stacks_linearization_residuals(run, /*step_checkpoint=*/false);
}

bool step_checkpoints_searched_exactly(const CostGraph& graph) { return scans_checkpointed_steps(graph); }

LoopBody loop_body_of(const CostGraph& graph, const Device& device, bool host_offload) {
  const std::int64_t rollout = graph.run().rollout;
  Plan reference = empty_plan(graph.stages());
  reference.step_checkpoint = true;
  reference.host_offload = host_offload;
  const LoopBaselines baselines = loop_baselines(graph, device, reference);
  LoopBody loop;
  loop.rollout = rollout;
  loop.optimizer_bytes = baselines.optimizer_bytes;
  loop.host_offload = host_offload;
  // Classes: the first step, the middle ones, the last.
  loop.class_start_bytes.assign(rollout > 2 ? 3 : 2, 0);
  for (std::int64_t step = 0; step < rollout; ++step) {
    const std::size_t c = step == 0 ? 0 : step == rollout - 1 ? loop.class_start_bytes.size() - 1 : 1;
    loop.class_start_bytes[c] =
        std::max(loop.class_start_bytes[c], baselines.body_start_bytes[static_cast<std::size_t>(step)]);
  }
  return loop;
}

ChainModel::ChainModel(const CostGraph& graph, const Device& device, std::optional<LoopBody> loop)
    : rg_(graph, loop.has_value()),
      loop_(std::move(loop)),
      steps_(static_cast<int>(graph.run().rollout)),
      edges_(edges_per_stage(graph.chain())),
      scratch_(graph.tensors().size(), true) {
  rg_.host_offload = loop_.has_value() && loop_->host_offload;
  // The simulator's condition (MemoryMachine::backward_region): top-level
  // regions outside a scanned loop.
  runs_ahead_ = top_level_regions_run_ahead(rg_.profile, graph.run(), loop_.has_value());
  set_step_classes();
  for (int step : class_steps_) translates_.push_back(stage_translates(rg_, step, edges_));
  find_stage_neighbours();
  condition_stages_ = blocked_edge_readers(graph, rg_.profile);
  static_bytes_ = static_breakdown(graph, device, rg_.profile, loop_.has_value()).total();
  measure_stage_times(device);
  // Work run ahead at the top level where the simulator runs it
  // (MemoryMachine::backward), as in top-level regions.
  has_top_level_ahead_ = runs_ahead_ && stage_count() > 1 && plain(0, 0, 1).ahead_at_top_level;
}

// Step classes: first, middle, last (fewer when the rollout is short).
void ChainModel::set_step_classes() {
  if (steps_ == 1) {
    class_steps_ = {0};
    class_multiplicity_ = {1};
  } else if (steps_ == 2) {
    class_steps_ = {0, 1};
    class_multiplicity_ = {1, 1};
  } else {
    class_steps_ = {0, 1, steps_ - 1};
    class_multiplicity_ = {1, steps_ - 2, 1};
  }
  // A loop body's graph has one step per class of the loop's rollout.
  if (loop_) {
    const auto rollout = static_cast<int>(loop_->rollout);
    if (steps_ != std::min(rollout, 3) || loop_->class_start_bytes.size() != class_steps_.size())
      throw std::logic_error("ChainModel: a loop body's graph has one step per class of its rollout");
    if (rollout > 3) class_multiplicity_[1] = rollout - 2;
  }
}

// Producer stage of each step-independent tensor key, per class; the
// stages each stage reads from and feeds, within a step.
void ChainModel::find_stage_neighbours() {
  const CostGraph& graph = rg_.graph;
  // Producer stage of each step-independent tensor key, per class.
  const int key_count = rg_.local_key.empty() ? 0 : *std::max_element(rg_.local_key.begin(), rg_.local_key.end()) + 1;
  key_stage_.assign(class_steps_.size(), std::vector<int>(static_cast<std::size_t>(key_count), -1));
  for (std::size_t c = 0; c < class_steps_.size(); ++c)
    for (std::size_t t = 0; t < graph.tensors().size(); ++t) {
      const OpId p = graph.producer(static_cast<TensorId>(t));
      if (p < 0 || graph.op(p).step != class_steps_[c]) continue;
      key_stage_[c][static_cast<std::size_t>(rg_.local_key[t])] = graph.op(p).stage;
    }
  input_producers_.assign(static_cast<std::size_t>(stage_count()), {});
  output_consumers_.assign(static_cast<std::size_t>(stage_count()), {});
  for (const Op& op : graph.ops()) {
    if (op.step != 0 || op.stage >= stage_count()) continue;
    auto& producers = input_producers_[static_cast<std::size_t>(op.stage)];
    for (TensorId t : op.inputs) {
      const OpId p = graph.producer(t);
      if (p < 0 || graph.op(p).step != 0 || graph.op(p).stage == op.stage) continue;
      producers.push_back(graph.op(p).stage);
    }
    auto& consumers = output_consumers_[static_cast<std::size_t>(op.stage)];
    for (TensorId t : op.outputs)
      for (OpId q : graph.consumers(t))
        if (graph.op(q).step == 0 && graph.op(q).stage != op.stage && graph.op(q).stage < stage_count())
          consumers.push_back(graph.op(q).stage);
  }
  for (auto* lists : {&input_producers_, &output_consumers_})
    for (auto& list : *lists) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
}

int ChainModel::condition_of(const Plan& plan) const {
  int last = -1;
  for (int s : condition_stages_)
    if (plan.edge_blocks[static_cast<std::size_t>(s)] > 1) last = s;
  return last;
}

std::uint32_t ChainModel::condition_bits(int c, int s) const {
  if (condition_ < 0 || s >= stage_count()) return 0;
  const int step = class_steps_[static_cast<std::size_t>(c)];
  std::uint32_t bits = 0;
  for (OpId op : rg_.conditioned_ops[static_cast<std::size_t>(step)][static_cast<std::size_t>(s)]) {
    const std::vector<int>& reach = rg_.condition_reach[static_cast<std::size_t>(op)];
    if (std::binary_search(reach.begin(), reach.end(), condition_))
      bits |= 1u << rg_.condition_index[static_cast<std::size_t>(op)];
  }
  return bits;
}

void ChainModel::measure_stage_times(const Device& device) {
  const CostGraph& graph = rg_.graph;
  const double flops_per_s = flops_per_second(graph.run(), device);
  stage_time_s_.assign(static_cast<std::size_t>(stage_count()), 0.0);
  edge_time_s_.assign(static_cast<std::size_t>(stage_count()), 0.0);
  // Steps may differ in bytes moved (JAX's first step reads the float32
  // frames, later ones the carry in the activation dtype), so each stage's
  // time is its mean over the steps: a plan repeats in every step. (A loop
  // body's graph has a step per class: each weighs as its class's steps.)
  for (const Op& op : graph.ops()) {
    if (op.stage >= stage_count()) continue;
    const double roofline = roofline_s(op.forward_flops, bytes_moved(graph, op), flops_per_s, device);
    const double time = loop_ ? roofline * class_multiplicity_[static_cast<std::size_t>(class_of(op.step))] /
                                    static_cast<double>(loop_->rollout)
                              : roofline / steps_;
    stage_time_s_[static_cast<std::size_t>(op.stage)] += time;
    if (op.edge_update) edge_time_s_[static_cast<std::size_t>(op.stage)] += time;
  }
}

const std::vector<Item>& ChainModel::items(int step, int stage, std::int64_t blocks) {
  auto it = items_.find(blocks);
  if (it == items_.end()) {
    Plan plan = empty_plan(graph().stages());
    for (std::size_t s = 0; s < edges_.size(); ++s)
      if (edges_[s] > 0) plan.edge_blocks[s] = std::min(blocks, edges_[s]);
    Schedule schedule = build_schedule(graph(), plan);
    std::vector<std::vector<std::vector<Item>>> per(
        static_cast<std::size_t>(steps_), std::vector<std::vector<Item>>(static_cast<std::size_t>(stage_count() + 1)));
    for (Item& item : schedule.items) {
      const Op& op = graph().op(item.kind == Item::Kind::op ? item.op : item.first_op);
      per[static_cast<std::size_t>(op.step)][static_cast<std::size_t>(op.stage)].push_back(std::move(item));
    }
    it = items_.emplace(blocks, std::move(per)).first;
  }
  return it->second[static_cast<std::size_t>(step)][static_cast<std::size_t>(stage)];
}

Effect ChainModel::run(int c, int s, std::int64_t blocks, StageContext ctx, const std::vector<std::int64_t>& in) {
  const int step = class_steps_[static_cast<std::size_t>(c)];
  // The last step's backward makes the parameters' gradients, but where
  // the loops hold them from the start (J50).
  ctx.first_parameter_gradients =
      step == steps_ - 1 && !rg_.profile.holds_parameter_gradients_through_loops(graph().run());
  // A translate of an earlier stage replays as that stage, its context
  // moved back (when the moved context still lies within the step).
  static const StageTranslate kNone;
  const StageTranslate& translate =
      s < stage_count() ? translates_[static_cast<std::size_t>(c)][static_cast<std::size_t>(s)] : kNone;
  const int offset = translate.offset;
  const bool moved = translate.base >= 0 && (ctx.original_forward || ctx.context_lo - offset >= 0) &&
                     (ctx.held_before < 0 || ctx.held_before - offset >= 0);
  const int stage = moved ? translate.base : s;
  if (moved) {
    if (!ctx.original_forward) {
      ctx.context_lo -= offset;
      ctx.context_hi -= offset;
    }
    if (ctx.held_before >= 0) ctx.held_before -= offset;
  }
  const auto& list = rg_.incoming[static_cast<std::size_t>(step)][static_cast<std::size_t>(s)];
  for (std::size_t i = 0; i < list.size() && i < in.size(); ++i)
    ctx.incoming_grads.emplace_back(moved ? translate.base_of(list[i]) : list[i], in[i]);
  std::sort(ctx.incoming_grads.begin(), ctx.incoming_grads.end());
  const StageRun& r = replay(c, stage, blocks, ctx);
  Effect e{r.forward.delta_bytes,
           r.forward.peak_bytes,
           r.backward.delta_bytes,
           r.backward.peak_bytes,
           r.released_at_end_bytes,
           r.backward_prelude_bytes,
           {},
           r.leaves_pending,
           r.ran_pending};
  e.ahead_delta = r.ahead.delta_bytes;
  e.ahead_peak = r.ahead.peak_bytes;
  e.ahead_ran_pending = r.ahead_ran_pending;
  e.ahead_at_top_level = r.ahead_at_top_level;
  e.backward_ran_pending = r.backward_ran_pending;
  if (r.ahead_at_top_level && s != 0)
    throw std::logic_error("ChainModel: work run ahead outside every checkpoint in a stage other than the first");
  if (r.leaves_pending) pending_effect_ = r.pending_effect;
  for (auto [t, bytes] : r.outgoing_grads) {
    if (moved) t = translate.of_base(t);
    e.outgoing.emplace_back(rg_.local_key[static_cast<std::size_t>(t)], bytes);
  }
  return e;
}

const StageRun& ChainModel::replay(int c, int stage, std::int64_t blocks, const StageContext& ctx) {
  ReplayKey key{c,
                stage,
                blocks,
                ctx.original_forward,
                ctx.context_lo,
                ctx.context_hi,
                ctx.saving,
                ctx.held_before,
                ctx.in_region,
                ctx.hold_outputs,
                ctx.incoming_grads,
                ctx.pending,
                ctx.runs_ahead,
                ctx.condition_bits};
  if (auto it = replays_.find(key); it != replays_.end()) return it->second;
  const int step = class_steps_[static_cast<std::size_t>(c)];
  return replays_.emplace(std::move(key), replay_stage(rg_, items(step, stage, blocks), step, stage, ctx, scratch_))
      .first->second;
}

const Effect& ChainModel::cached(EffectKey key, const std::vector<std::int64_t>& in, StageContext ctx) {
  key.condition_bits = ctx.condition_bits = condition_bits(key.step_class, key.stage);
  auto& by_incoming = cache_[key];
  if (auto it = by_incoming.find(in); it != by_incoming.end()) return it->second;
  return by_incoming.emplace(in, run(key.step_class, key.stage, key.blocks, ctx, in)).first->second;
}

std::vector<std::int64_t> ChainModel::signature(int c, int s, const GradState& state) const {
  const int step = class_steps_[static_cast<std::size_t>(c)];
  std::vector<std::int64_t> in;
  for (TensorId t : rg_.incoming[static_cast<std::size_t>(step)][static_cast<std::size_t>(s)]) {
    const int key = rg_.local_key[static_cast<std::size_t>(t)];
    const auto it =
        std::lower_bound(state.begin(), state.end(), key, [](const auto& entry, int k) { return entry.first < k; });
    in.push_back(it != state.end() && it->first == key ? it->second : graph().tensor(t).gradient_bytes());
  }
  return in;
}

int ChainModel::norm_lo(int s, int a) const {
  for (int p : input_producers_[static_cast<std::size_t>(s)])
    if (p >= a) return std::min(p, s);
  return s;
}

int ChainModel::norm_hi(int s, int b) const {
  int best = s;
  for (int q : output_consumers_[static_cast<std::size_t>(s)])
    if (q <= b) best = std::max(best, q);
  return best;
}

std::pair<int, int> ChainModel::norm_bounds(int from, int to, int a, int b) const {
  int lo = from, hi = to;
  for (int s = from; s <= to; ++s) {
    lo = std::min(lo, norm_lo(s, a));
    hi = std::max(hi, norm_hi(s, b));
  }
  return {lo, hi};
}

std::vector<std::int64_t> ChainModel::boundary(int c, int p, const GradState& state) const {
  // hand_over() never removes entries: keep those of tensors made before
  // stage p (in this step or the one before), as (key, bytes) pairs.
  const auto& producer_stage = key_stage_[static_cast<std::size_t>(c)];
  std::vector<std::int64_t> out;
  for (const auto& [key, bytes] : state) {
    if (producer_stage[static_cast<std::size_t>(key)] >= p) continue;
    out.push_back(key);
    out.push_back(bytes);
  }
  return out;
}

const Effect& ChainModel::plain(int c, int s, std::int64_t blocks, const std::vector<std::int64_t>& in, bool pending) {
  StageContext ctx;
  set_pending(ctx, pending);
  return cached({c, s, blocks, kPlain, 0, 0, 0, pending}, in, ctx);
}

Piece ChainModel::top_level_ahead_effect(int c, std::int64_t blocks, const GradState& grads) {
  const Effect& e = plain(c, 0, blocks, signature(c, 0, grads));
  return {e.ahead_delta, e.ahead_peak};
}

const Effect& ChainModel::region_forward(int c, int s, std::int64_t blocks, int a) {
  a = norm_lo(s, a);
  StageContext ctx;
  ctx.saving = false;
  ctx.held_before = a;
  return cached({c, s, blocks, kRegionForward, a, 0, 0}, {}, ctx);
}

void ChainModel::set_pending(StageContext& ctx, bool pending) const {
  ctx.pending = pending;
  if (pending) ctx.pending_effect = pending_effect_;
}

const Effect& ChainModel::saving_recompute(int c, int s, std::int64_t blocks, int kind, int lo, int hi,
                                           bool hold_outputs, const std::vector<std::int64_t>& in, bool pending,
                                           bool runs_ahead) {
  lo = norm_lo(s, lo);
  hi = norm_hi(s, hi);
  StageContext ctx = StageContext::recomputation(lo, hi);
  ctx.in_region = true;
  ctx.hold_outputs = hold_outputs;
  ctx.runs_ahead = runs_ahead;
  set_pending(ctx, pending);
  return cached({c, s, blocks, kind, lo, hi, 0, pending}, in, ctx);
}

const Effect& ChainModel::recompute_plain(int c, int s, std::int64_t blocks, int a, int b,
                                          const std::vector<std::int64_t>& in, bool pending) {
  return saving_recompute(c, s, blocks, kRecomputePlain, a, b, false, in, pending, runs_ahead_);
}

const Effect& ChainModel::recompute_in_inner(int c, int s, std::int64_t blocks, int a, int b, int inner_from,
                                             bool pending) {
  a = norm_lo(s, a);
  b = norm_hi(s, b);
  inner_from = norm_lo(s, inner_from);
  StageContext ctx = StageContext::recomputation(a, b);
  ctx.saving = false;
  ctx.held_before = inner_from;  // the inner region keeps its inputs from here
  set_pending(ctx, pending);
  return cached({c, s, blocks, kRecomputeInInner, a, b, inner_from, pending}, {}, ctx);
}

const Effect& ChainModel::inner_recompute(int c, int s, std::int64_t blocks, int c0, int d,
                                          const std::vector<std::int64_t>& in) {
  return saving_recompute(c, s, blocks, kInnerRecompute, c0, d, nested_regions_hold_outputs(rg_.profile), in);
}

const Effect& ChainModel::loss(int c, const std::vector<std::int64_t>& in) {
  return cached({c, stage_count(), 1, kLoss, 0, 0, 0}, in, StageContext{});
}

std::int64_t ChainModel::kept_bytes(int c, int from, int to, int made_from, int made_before) const {
  return kept_bytes_of(c, from, to, made_from, made_before, false);
}

std::int64_t ChainModel::released_before_end(int c, int from, int to, int made_from, int made_before) const {
  if (!runs_ahead_) return 0;  // the same top-level regions let go early
  return kept_bytes_of(c, from, to, made_from, made_before, true);
}

std::int64_t ChainModel::kept_bytes_of(int c, int from, int to, int made_from, int made_before,
                                       bool last_reader_only) const {
  const auto cache_key = std::make_tuple(c, from, to, made_from, made_before, last_reader_only);
  if (auto it = kept_cache_.find(cache_key); it != kept_cache_.end()) return it->second;
  const int step = class_steps_[static_cast<std::size_t>(c)];
  const int lo = made_from < 0 ? -1 : rg_.key(step, made_from);
  const int hi = rg_.key(step, made_before);
  std::vector<TensorId> seen;
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < rg_.op_key.size(); ++i) {
    const int k = rg_.op_key[i];
    if (k < rg_.key(step, from) || k > rg_.key(step, to)) continue;
    for (TensorId t : graph().op(static_cast<OpId>(i)).inputs) {
      if (graph().tensor(t).role != TensorRole::activation) continue;
      const int pk = rg_.producer_key[static_cast<std::size_t>(t)];
      if (pk < lo || pk >= hi || std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
      seen.push_back(t);
      if (last_reader_only && kept_input_reader_stage(graph(), rg_.profile, t) < 0) continue;
      bytes += graph().tensor(t).bytes();
    }
  }
  return kept_cache_[cache_key] = bytes;
}

namespace {

// The running total of a walk through the schedule, and its highest point.
struct MemoryWalk {
  std::int64_t mem = 0;
  std::int64_t peak = 0;

  void forward(const Effect& e) {
    peak = std::max(peak, mem + e.forward_peak);
    mem += e.forward_delta;
  }
  // Work run ahead of its region's recomputation.
  void ahead(const Effect& e) { piece({e.ahead_delta, e.ahead_peak}); }
  void piece(Piece p) {
    peak = std::max(peak, mem + p.peak);
    mem += p.delta;
  }
  void backward(const Effect& e, GradState& grads) {
    peak = std::max(peak, mem + e.backward_peak);
    mem += e.backward_delta;
    ChainModel::hand_over(e, grads);
  }
};

// The inner region of `region` that holds stage t, or null.
const Region* inner_region_of(const Region& region, int t) {
  const Region* in = nullptr;
  for (const Region& x : region.inner)
    if (x.from <= t && t <= x.to) in = &x;
  return in;
}

std::int64_t blocks_of(const Plan& plan, int s) { return plan.edge_blocks[static_cast<std::size_t>(s)]; }

// One rollout step's forward pass, stage by stage, regions not saving.
void forward_step(ChainModel& m, const Plan& plan, int c, MemoryWalk& w) {
  const int n = m.stage_count();
  std::size_t r = 0;
  for (int s = 0; s < n;) {
    if (r < plan.checkpoints.size() && plan.checkpoints[r].from == s) {
      const Region& region = plan.checkpoints[r++];
      for (int t = region.from; t <= region.to; ++t) w.forward(m.region_forward(c, t, blocks_of(plan, t), region.from));
      s = region.to + 1;
    } else {
      w.forward(m.plain(c, s, blocks_of(plan, s)));
      ++s;
    }
  }
  w.forward(m.loss(c));
}

// An inner region's recomputation and backward, inside its region a..b;
// then what it held is let go.
void backward_inner(ChainModel& m, const Plan& plan, int c, const Region& in, int a, MemoryWalk& w, GradState& grads) {
  for (int u = in.from; u <= in.to; ++u) w.forward(m.inner_recompute(c, u, blocks_of(plan, u), in.from, in.to));
  std::int64_t held_outputs = 0;
  for (int u = in.to; u >= in.from; --u) {
    const Effect& e = m.inner_recompute(c, u, blocks_of(plan, u), in.from, in.to, m.signature(c, u, grads));
    w.backward(e, grads);
    held_outputs += e.released_at_end;
  }
  w.mem -= held_outputs + m.kept_bytes(c, in.from, in.to, a, in.from) + m.released_before_end(c, in.from, in.to, -1, a);
}

// A region's work run ahead, its recomputation (its pieces in order; one
// of them may run the pending work), then its backward (in reverse), then
// what its checkpoint kept is let go. The replay of work run ahead needs
// only the gradients of what the region's later stages do not read, as
// they stand when the region starts.
void backward_region(ChainModel& m, const Plan& plan, int c, const Region& region, MemoryWalk& w, GradState& grads,
                     bool& pending) {
  const int a = region.from, b = region.to;
  for (int t = a; t <= b && m.runs_ahead(); ++t) {
    if (inner_region_of(region, t)) continue;
    const Effect& e = m.recompute_plain(c, t, blocks_of(plan, t), a, b, m.signature(c, t, grads), pending);
    w.ahead(e);
    pending = pending && !e.ahead_ran_pending;
  }
  for (int t = a; t <= b; ++t) {
    const Region* in = inner_region_of(region, t);
    const Effect& e = in ? m.recompute_in_inner(c, t, blocks_of(plan, t), a, b, in->from, pending)
                         : m.recompute_plain(c, t, blocks_of(plan, t), a, b, {}, pending);
    w.forward(e);
    pending = pending && !e.ran_pending;
  }
  for (int t = b; t >= a;) {
    const Region* in = inner_region_of(region, t);
    if (in) {
      backward_inner(m, plan, c, *in, a, w, grads);
      t = in->from - 1;
    } else {
      w.backward(m.recompute_plain(c, t, blocks_of(plan, t), a, b, m.signature(c, t, grads)), grads);
      --t;
    }
  }
  w.mem -= m.kept_bytes(c, a, b, -1, a) - m.released_before_end(c, a, b, -1, a);
}

// One rollout step's backward pass: the loss, then the stages in reverse.
// `pending`: pending work waits.
void backward_step(ChainModel& m, const Plan& plan, int c, MemoryWalk& w, GradState& grads, bool& pending) {
  const int n = m.stage_count();
  w.backward(m.loss(c, m.signature(c, n, grads)), grads);
  std::size_t r = plan.checkpoints.size();
  bool last_segment_done = false;
  for (int s = n - 1; s >= 0;) {
    if (r > 0 && plan.checkpoints[r - 1].to == s) {
      const Region& region = plan.checkpoints[--r];
      backward_region(m, plan, c, region, w, grads, pending);
      s = region.from - 1;
    } else {
      const Effect& e = m.plain(c, s, blocks_of(plan, s), m.signature(c, s, grads), pending);
      w.backward(e, grads);
      pending = (pending && !e.backward_ran_pending) || e.leaves_pending;
      --s;
    }
    // After the last stage's segment: the first stage's work run ahead at
    // the top level.
    if (!last_segment_done && m.ahead_hoisted()) w.piece(m.top_level_ahead_effect(c, blocks_of(plan, 0), grads));
    last_segment_done = true;
  }
}

// Each forward execution of a stage beyond its first, over the rollout.
double recompute_seconds(const ChainModel& m, const Plan& plan) {
  double extra = 0;
  for (int s = 0; s < m.stage_count(); ++s) {
    int depth = 0;
    for (const Region& region : plan.checkpoints)
      if (region.from <= s && s <= region.to) depth = inner_region_of(region, s) ? 2 : 1;
    extra += depth * m.stage_forward_s(s) + (blocks_of(plan, s) > 1 ? m.edge_forward_s(s) : 0.0);
  }
  return extra * m.steps();
}

}  // namespace

ChainModel::Prediction ChainModel::predict(const Plan& plan) {
  set_condition(condition_of(plan));
  const bool first_stage_plain = std::none_of(plan.checkpoints.begin(), plan.checkpoints.end(),
                                              [](const Region& region) { return region.from == 0; });
  set_first_stage(!first_stage_plain        ? FirstStage::in_region
                  : plan.edge_blocks[0] > 1 ? FirstStage::plain_blocked
                                            : FirstStage::plain);
  if (loop_) {
    // Each class's body from the memory it starts from: the step's
    // recomputation (its loss's seeds are already there), then its backward.
    std::int64_t peak = loop_->optimizer_bytes;
    for (int c = 0; c < class_count(); ++c) {
      MemoryWalk w;
      forward_step(*this, plan, c, w);
      GradState grads;
      bool pending = false;  // never set in a loop body
      backward_step(*this, plan, c, w, grads, pending);
      peak = std::max(peak, loop_->class_start_bytes[static_cast<std::size_t>(c)] + w.peak);
    }
    return {peak, recompute_seconds(*this, plan)};
  }
  MemoryWalk w;
  for (int step = 0; step < steps_; ++step) forward_step(*this, plan, class_of(step), w);
  for (int step = 0; step < steps_; ++step) w.mem += loss(class_of(step)).backward_prelude;
  GradState grads;
  bool pending = false;
  for (int step = steps_ - 1; step >= 0; --step) backward_step(*this, plan, class_of(step), w, grads, pending);
  if (pending) {  // nothing set the pending work off: it runs as the backward pass ends
    w.peak = std::max(w.peak, w.mem + pending_effect_.peak);
    w.mem += pending_effect_.delta;
  }
  w.peak = std::max(w.peak, w.mem);  // the optimizer step: every parameter gradient resident
  return {static_bytes_ + w.peak, recompute_seconds(*this, plan)};
}

}  // namespace actmem::detail

#include "solve/solver_replay.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <utility>

#include "simulate/memory_machine.h"

namespace actmem::detail {

ReplayGraph::ReplayGraph(const CostGraph& g, bool in_loop_body)
    : graph(g),
      profile(memory_profile(g.run(), g.model().implementation)),
      loop_body(in_loop_body),
      stage_count(static_cast<int>(g.stages().size())) {
  const auto ops = g.ops();
  op_key.resize(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) op_key[i] = key(ops[i].step, ops[i].stage);
  const std::size_t n = g.tensors().size();
  producer_key.assign(n, -1);
  last_use_key.assign(n, -1);
  // op_key never decreases along ops() (stages in chain order,
  // CostGraphBuilder checks it), so the last use's key is the largest.
  for (std::size_t t = 0; t < n; ++t) {
    const TensorLifetime& life = g.lifetimes()[t];
    if (life.producer >= 0) producer_key[t] = op_key[static_cast<std::size_t>(life.producer)];
    if (life.last_use >= 0) last_use_key[t] = op_key[static_cast<std::size_t>(life.last_use)];
  }
  find_gradients();
  find_local_keys();
  find_incoming();
  find_first_readers();
  find_conditioned_ops();
}

// Which tensors receive a gradient: backward runs an op when one of its
// outputs has one (the losses are seeded), and it gives one to every input
// that requires it.
void ReplayGraph::find_gradients() {
  const auto ops = graph.ops();
  has_grad.assign(graph.tensors().size(), 0);
  for (std::size_t i = ops.size(); i-- > 0;) {
    const Op& op = ops[i];
    bool any = op.kind == OpKind::mse_loss;
    for (TensorId t : op.outputs) any = any || has_grad[static_cast<std::size_t>(t)];
    if (!any) continue;
    for (TensorId t : op.inputs)
      if (graph.tensor(t).requires_grad && graph.tensor(t).role == TensorRole::activation)
        has_grad[static_cast<std::size_t>(t)] = 1;
  }
}

void ReplayGraph::find_local_keys() {
  const auto ops = graph.ops();
  local_key.assign(graph.tensors().size(), -1);
  std::vector<int> first_of_step;
  for (std::size_t i = 0; i < ops.size(); ++i)
    if (first_of_step.size() <= static_cast<std::size_t>(ops[i].step)) first_of_step.push_back(static_cast<int>(i));
  for (std::size_t i = 0; i < ops.size(); ++i)
    for (std::size_t k = 0; k < ops[i].outputs.size(); ++k)
      local_key[static_cast<std::size_t>(ops[i].outputs[k])] =
          (static_cast<int>(i) - first_of_step[static_cast<std::size_t>(ops[i].step)]) * 8 + static_cast<int>(k);
}

void ReplayGraph::find_incoming() {
  const auto ops = graph.ops();
  const int steps = static_cast<int>(graph.run().rollout);
  incoming.assign(static_cast<std::size_t>(steps),
                  std::vector<std::vector<TensorId>>(static_cast<std::size_t>(stage_count + 1)));
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const int self = op_key[i];
    auto& list = incoming[static_cast<std::size_t>(op.step)][static_cast<std::size_t>(op.stage)];
    auto add = [&](TensorId t) {
      if (!has_grad[static_cast<std::size_t>(t)] || last_use_key[static_cast<std::size_t>(t)] <= self) return;
      if (std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
    };
    for (TensorId t : op.outputs) add(t);
    for (TensorId t : op.inputs)
      if (graph.tensor(t).role == TensorRole::activation && producer_key[static_cast<std::size_t>(t)] != self) add(t);
  }
  for (auto& step : incoming)
    for (auto& list : step) std::sort(list.begin(), list.end());
}

void ReplayGraph::find_conditioned_ops() {
  const auto ops = graph.ops();
  condition_index.assign(ops.size(), -1);
  condition_reach.assign(ops.size(), {});
  conditioned_ops.assign(static_cast<std::size_t>(graph.run().rollout),
                         std::vector<std::vector<OpId>>(static_cast<std::size_t>(stage_count + 1)));
  for (auto& [op, stages] : detail::conditioned_ops(graph, profile)) {
    const auto i = static_cast<std::size_t>(op);
    auto& list = conditioned_ops[static_cast<std::size_t>(ops[i].step)][static_cast<std::size_t>(ops[i].stage)];
    if (list.size() == 32) throw std::logic_error("solver: more than 32 conditioned ops in one stage");
    condition_index[i] = static_cast<int>(list.size());
    list.push_back(op);
    condition_reach[i] = std::move(stages);
  }
}

void ReplayGraph::find_first_readers() {
  first_reader_key.assign(graph.tensors().size(), -1);
  for (std::size_t t = 0; t < graph.tensors().size(); ++t) {
    if (graph.tensor(static_cast<TensorId>(t)).role != TensorRole::activation) continue;
    std::vector<int> readers;
    for (OpId c : graph.consumers(static_cast<TensorId>(t)))
      if (op_key[static_cast<std::size_t>(c)] != producer_key[t])
        readers.push_back(op_key[static_cast<std::size_t>(c)]);
    std::sort(readers.begin(), readers.end());
    readers.erase(std::unique(readers.begin(), readers.end()), readers.end());
    if (readers.size() < 2) continue;
    // The first reader whose read keeps it; where none does, each read
    // uses it as any other and the last lets it go.
    for (int reader : readers) {
      bool saves = false;
      for (OpId c : graph.consumers(static_cast<TensorId>(t)))
        saves = saves || (op_key[static_cast<std::size_t>(c)] == reader &&
                          read_saves(graph, profile, c, static_cast<TensorId>(t)));
      if (!saves) continue;
      first_reader_key[t] = reader;
      break;
    }
  }
}

namespace {

// One stage on the memory machine (memory_machine.h). Buffers made before
// the stage start live; holders outside the stage are one extra reference
// that never goes away.
class Replay : MemoryMachine {
 public:
  Replay(const ReplayGraph& rg, int step, int stage, const StageContext& ctx, TensorState& state)
      : MemoryMachine(rg.graph, &state), rg_(rg), step_(step), stage_(stage), ctx_(ctx), state_(state) {
    MachineSetup setup;
    setup.loop_body = rg.loop_body;
    setup.offload_step_inputs = rg.loop_body && rg.host_offload;
    setup.pending_left_to_caller = true;  // the caller runs them (StageRun::leaves_pending)
    if (ctx.pending) setup.pending_elsewhere = ctx.pending_effect;
    set_up(std::move(setup));
  }

  StageRun run(const std::vector<Item>& items) {
    const std::vector<OpId> ops = ops_of(items);
    reset_state(ops);
    const Keys keys = context_keys();
    const std::vector<TensorId> externals = external_inputs(ops, keys);
    mark_produced(items);
    count_uses(items, 1);
    const std::vector<TensorId> read_later = allocate_externals(externals, keys);
    const std::vector<TensorId> held_outputs = count_output_uses(ops, keys);

    StageRun result;
    // A top-level region's recomputation: the checkpoint's hold on an input
    // this stage alone reads ends at its last reader (J37).
    const bool top_level_recompute = ctx_.runs_ahead && ctx_.saving && !ctx_.original_forward;
    if (top_level_recompute) {
      std::vector<TensorId> held;
      for (TensorId t : externals)
        if (!made_here(t)) held.push_back(t);
      last_readers_ = last_readers(items, held);
    }
    std::vector<Item> rest_recomputed, rest_differentiated;
    const bool ran_ahead = top_level_recompute && run_ahead(items, keys, rest_recomputed, rest_differentiated, result);
    const std::vector<Item>& recomputed = ran_ahead ? rest_recomputed : items;
    const std::vector<Item>& differentiated = ran_ahead ? rest_differentiated : items;
    // The loop body's slice of the step's target lives from the body's
    // start (the loop's baseline, not this replay's work) to the loss's
    // backward (J44).
    if (rg_.loop_body && ctx_.original_forward) slice_step_target(ops);
    const std::int64_t start = live();
    peak_ = start;
    // A loop body's original forward pass is the step's recomputation;
    // any other context is a checkpoint's.
    if (top_level_recompute)
      recompute_part(recomputed, last_readers_);
    else
      forward_part(recomputed, ctx_.saving, rg_.loop_body || !ctx_.original_forward ? Pass::recompute : Pass::forward,
                   /*region_recomputation=*/!ctx_.original_forward,
                   /*step_recomputation=*/rg_.loop_body && ctx_.original_forward);
    result.forward = {peak_ - start, live() - start};
    result.ran_pending = ran_pending_elsewhere() && !result.ahead_ran_pending;
    if (ctx_.saving) run_backward(differentiated, ops, externals, read_later, held_outputs, result);
    return result;
  }

 private:
  // The keys (ReplayGraph::key) of this stage and of the context's bounds.
  struct Keys {
    int self;  // this stage
    int lo;    // the context's first stage (-1: the original forward pass)
    int hi;    // its last (kNoEnd: the original forward pass)
    int held;  // what a holding checkpoint started at (-1: none)
  };
  static constexpr int kNoEnd = std::numeric_limits<int>::max();

  // In a loop body the "original" forward pass is the step's recomputation:
  // its context is the step, loss included; what earlier steps made is held
  // by the step's checkpoint.
  Keys context_keys() const {
    int lo = rg_.key(step_, ctx_.context_lo), hi = rg_.key(step_, ctx_.context_hi);
    if (ctx_.original_forward) {
      lo = rg_.loop_body ? rg_.key(step_, 0) : -1;
      hi = rg_.loop_body ? rg_.key(step_, rg_.stage_count) : kNoEnd;
    }
    return {rg_.key(step_, stage_), lo, hi, ctx_.held_before < 0 ? -1 : rg_.key(step_, ctx_.held_before)};
  }

  // Every entry of the state the machine reads is of these ops' tensors.
  void reset_state(const std::vector<OpId>& ops) {
    std::vector<TensorId> tensors;
    for (OpId id : ops) {
      tensors.insert(tensors.end(), g_.op(id).inputs.begin(), g_.op(id).inputs.end());
      tensors.insert(tensors.end(), g_.op(id).outputs.begin(), g_.op(id).outputs.end());
    }
    state_.reset(tensors, ctx_.first_parameter_gradients);
    begin_part();
  }

  // The activations the stage reads and does not make, once each. The
  // context: ops of this stage are made here; so are inputs made by earlier
  // stages inside the context's range. Inputs made elsewhere are live
  // buffers at the start.
  std::vector<TensorId> external_inputs(const std::vector<OpId>& ops, const Keys& keys) {
    std::vector<TensorId> externals;
    for (OpId id : ops)
      for (TensorId t : g_.op(id).inputs) {
        if (tensor(t).role != TensorRole::activation) continue;
        if (rg_.producer_key[static_cast<std::size_t>(t)] == keys.self) continue;
        if (std::find(externals.begin(), externals.end(), t) != externals.end()) continue;
        externals.push_back(t);
      }
    for (TensorId t : externals)
      if (rg_.producer_key[static_cast<std::size_t>(t)] >= keys.lo) mark_made_here(t);
    return externals;
  }

  // Live buffers for the external inputs, with the references that hold
  // them. Returns the inputs a later stage of the step also reads: that
  // read is over when this stage's backward starts (the whole forward pass
  // ran).
  std::vector<TensorId> allocate_externals(const std::vector<TensorId>& externals, const Keys& keys) {
    std::vector<TensorId> read_later;
    for (TensorId t : externals) {
      const int pk = rg_.producer_key[static_cast<std::size_t>(t)];
      const int first_reader = rg_.first_reader_key[static_cast<std::size_t>(t)];
      int refs = 1;  // made before the context: held by the checkpoint that keeps it
      if (made_here(t)) {
        refs = uses(t);
        if (consumed_after(t, keys.self, keys.hi) || pk < keys.held) ++refs;
        if (first_reader == keys.self && ctx_.original_forward && ctx_.saving) read_later.push_back(t);
        if (first_reader > pk && first_reader < keys.self) ++refs;  // held by its first reader
      }
      current(t) = allocate(tensor(t).bytes(), kActivations, refs, t);
    }
    return read_later;
  }

  // Outputs used later in the context: one reference for those users.
  // Held outputs of a nested region's recomputation: one more, let go when
  // the nested region ends; returned.
  std::vector<TensorId> count_output_uses(const std::vector<OpId>& ops, const Keys& keys) {
    std::vector<TensorId> held_outputs;
    for (OpId id : ops)
      for (TensorId t : g_.op(id).outputs) {
        if (consumed_after(t, keys.self, keys.hi)) add_use(t);
        if (ctx_.hold_outputs && consumed_after(t, keys.hi, kNoEnd)) {
          add_use(t);
          held_outputs.push_back(t);
        }
      }
    return held_outputs;
  }

  // The work the stage runs ahead in its region, if any (then true): the
  // engine's early_roles() on the stage's items, the region being the
  // context's stages (a complete branch and its ancestors, J33),
  // recomputed and differentiated (StageRun::ahead) with the gradients
  // that exist as the region's backward starts (of tensors read after the
  // region); `recomputed` and `differentiated` get the rest.
  bool run_ahead(const std::vector<Item>& items, const Keys& keys, std::vector<Item>& recomputed,
                 std::vector<Item>& differentiated, StageRun& result) {
    const std::vector<EarlyRole> roles = early_roles(items, [&](OpId id) {
      const int k = rg_.op_key[static_cast<std::size_t>(id)];
      return k >= keys.lo && k <= keys.hi;
    });
    if (std::find(roles.begin(), roles.end(), EarlyRole::early_branch) == roles.end()) return false;
    allocate_incoming(keys, /*read_after_region=*/true);
    allocated_read_after_region_ = true;
    std::vector<Item> ahead_recomputed, ahead_differentiated;
    for (std::size_t i = 0; i < items.size(); ++i) {
      (roles[i] == EarlyRole::late ? recomputed : ahead_recomputed).push_back(items[i]);
      (roles[i] == EarlyRole::early_branch ? ahead_differentiated : differentiated).push_back(items[i]);
    }
    const std::int64_t start = live();
    peak_ = start;
    recompute_part(ahead_recomputed, last_readers_);
    backward_part(ahead_differentiated, /*in_region=*/true);
    result.ahead = {peak_ - start, live() - start};
    result.ahead_ran_pending = ran_pending_elsewhere();
    return true;
  }

  // The gradients flowing in from later stages (StageContext::
  // incoming_grads): those of tensors read after the context
  // (`read_after_region`), or the others. Called once for each.
  void allocate_incoming(const Keys& keys, bool read_after_region) {
    for (TensorId t : rg_.incoming[static_cast<std::size_t>(step_)][static_cast<std::size_t>(stage_)]) {
      if (consumed_after(t, keys.hi, kNoEnd) != read_after_region) continue;
      std::int64_t bytes = tensor(t).gradient_bytes();
      for (const auto& [u, b] : ctx_.incoming_grads)
        if (u == t) bytes = b;
      grad(t) = allocate(bytes, kGradients, 1);
    }
  }

  // Backward: gradients flowing in from later stages; for the loss, its
  // seed (the held loss goes when all seeds exist).
  void run_backward(const std::vector<Item>& items, const std::vector<OpId>& ops,
                    const std::vector<TensorId>& externals, const std::vector<TensorId>& read_later,
                    const std::vector<TensorId>& held_outputs, StageRun& result) {
    for (TensorId t : read_later) release(current(t));
    const std::int64_t prelude = live();
    for (OpId id : ops) seed_gradients(g_.op(id));
    release_losses();
    result.backward_prelude_bytes = live() - prelude;
    const Keys keys = context_keys();
    if (!allocated_read_after_region_) allocate_incoming(keys, true);
    allocate_incoming(keys, false);
    backward_start_ = live();
    peak_ = backward_start_;
    backward_result_ = &result;
    backward_part(items, ctx_.in_region);
    backward_result_ = nullptr;
    result.backward = {peak_ - backward_start_, live() - backward_start_};
    result.backward_ran_pending = ran_pending_elsewhere() && !result.ran_pending && !result.ahead_ran_pending;
    if (has_pending()) {
      const std::int64_t before = live();
      peak_ = before;
      result.leaves_pending = true;
      result.pending_effect.threshold = pending_threshold();
      run_pending();
      result.pending_effect.peak = peak_ - before;
      result.pending_effect.delta = live() - before;
    }
    const std::int64_t before = live();
    for (TensorId t : held_outputs)
      if (current(t) >= 0) release(current(t));
    result.released_at_end_bytes = before - live();
    for (TensorId t : externals)
      if (grad(t) >= 0) result.outgoing_grads.emplace_back(t, buffer(grad(t)).bytes);
  }

  // A consumer of t with a key in (self, hi]. The last use has the largest
  // key (ReplayGraph): none when it is at most self, the last use itself
  // when it is at most hi (always when hi is kNoEnd).
  bool consumed_after(TensorId t, int self, int hi) const {
    const int last = rg_.last_use_key[static_cast<std::size_t>(t)];
    if (last <= self) return false;
    if (last <= hi) return true;
    for (OpId c : g_.consumers(t)) {
      const int k = rg_.op_key[static_cast<std::size_t>(c)];
      if (k > self && k <= hi) return true;
    }
    return false;
  }

  // Only the peak matters here; time is the search's (additive) concern.
  void on_forward(const Op&, double, Pass) override {}
  void on_backward(const Op&, double) override {}
  void sample_op(Pass, const Op&, int) override { peak_ = std::max(peak_, live()); }
  void sample_concat(Pass, const Item&) override { peak_ = std::max(peak_, live()); }
  void sample_transient() override { peak_ = std::max(peak_, live()); }
  // Work run ahead at the top level: its effect, and the backward's the
  // rest's.
  void on_top_level_ahead_done() override {
    if (!backward_result_) return;
    backward_result_->ahead = {peak_ - backward_start_, live() - backward_start_};
    backward_result_->ahead_at_top_level = true;
    backward_start_ = live();
    peak_ = backward_start_;
  }
  // As the plan condition says, for this stage's conditioned ops.
  bool reaches_blocked_stage(OpId op) const override {
    const int i = rg_.condition_index[static_cast<std::size_t>(op)];
    return i >= 0 && ((ctx_.condition_bits >> i) & 1u) != 0;
  }

  const ReplayGraph& rg_;
  int step_, stage_;
  StageContext ctx_;
  TensorState& state_;
  std::int64_t peak_ = 0;
  bool allocated_read_after_region_ = false;  // by run_ahead()
  LastReaders last_readers_;                  // J37's, in a top-level region's recomputation
  std::int64_t backward_start_ = 0;           // what run_backward() measures from
  StageRun* backward_result_ = nullptr;       // while run_backward() runs
};

}  // namespace

StageRun replay_stage(const ReplayGraph& rg, const std::vector<Item>& items, int step, int stage,
                      const StageContext& ctx, TensorState& state) {
  return Replay(rg, step, stage, ctx, state).run(items);
}

}  // namespace actmem::detail

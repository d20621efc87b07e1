#pragma once
// The solver's internal cost model: per-stage replays (solver_replay.h)
// composed along the simulator's execution order. For a plan it predicts
// the simulator's peak_bytes exactly (tests check this plan by plan against
// simulate()) and its step time up to floating-point summation order.
//
// Rollout steps fall in classes that replay alike: the first step (its grid
// input is a model input), the middle steps, and the last step (the first
// to run backward, so it allocates the parameter gradients).

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"
#include "solve/solver_replay.h"
#include "solve/stage_translates.h"
#include "solve/suffix_sums.h"

namespace actmem::detail {

// Memory effects of one execution pattern of a stage (or a group of
// stages), relative to the memory before it.
struct Effect {
  std::int64_t forward_delta = 0, forward_peak = 0;
  std::int64_t backward_delta = 0, backward_peak = 0;
  std::int64_t released_at_end = 0;   // released when the enclosing nested region ends
  std::int64_t backward_prelude = 0;  // loss only: its seed allocated, the held loss released
  // Gradients handed to earlier stages: (step-independent tensor key, bytes).
  std::vector<std::pair<int, std::int64_t>> outgoing;
  // Pending work (solver_replay.h): its backward leaves some waiting
  // (ChainModel::pending_effect() runs it); its forward, pending, ran it; its
  // backward, pending, did (a plain stage's edge block recomputing).
  bool leaves_pending = false, ran_pending = false, backward_ran_pending = false;
  // Work run ahead, by a plain child of a top-level region: its
  // recomputation and backward before the region's recomputation (zero
  // where it has none; the other fields are then the rest's), and whether
  // that ran the pending work.
  std::int64_t ahead_delta = 0, ahead_peak = 0;
  bool ahead_ran_pending = false;
  // Plain at the top level: the ahead fields are the work the stage runs
  // ahead, differentiated as the last segment's backward ends.
  bool ahead_at_top_level = false;
};

// Gradient buffers in flight between stages during the backward pass:
// (step-independent tensor key, bytes), sorted by key (absent: the tensor's
// own size). A flat vector: the search copies these for every option.
using GradState = std::vector<std::pair<int, std::int64_t>>;

// A rollout with every step under its own checkpoint, run as a loop whose
// body recomputes one step and differentiates through it (XLA's scan,
// simulate/loop_baselines.h). Its peak is, over the step classes, the
// memory a class's bodies start from plus the most the body adds; the
// body's work is the chain model's, replayed with the loop body's rules on
// a graph of min(rollout, 3) steps (one per class), and what it starts
// from is measured once at the full rollout, the same for every plan.
struct LoopBody {
  std::int64_t rollout = 0;
  // Per class: the most memory (static bytes included) any of its steps'
  // bodies starts from.
  std::vector<std::int64_t> class_start_bytes;
  std::int64_t optimizer_bytes = 0;  // at the optimizer step, after the loop
  bool host_offload = false;         // the steps' kept inputs in host memory
};

// The loop of `graph`'s rollout (> 1), each step checkpointed (its kept
// inputs and targets in host memory with `host_offload`): what it holds
// around the bodies, measured by simulating one plan.
LoopBody loop_body_of(const CostGraph& graph, const Device& device, bool host_offload = false);

// Whether the chain model describes the plans without step checkpoints on
// `graph`'s run. Not under JAX at rollout > 1: XLA's scanned rollout then
// stacks JAX's linearization residuals of the ops outside every
// checkpoint (docs/journal.md J11), which its stage replays do not
// model; the simulator does. Those runs are searched with each step
// checkpointed (DeepMind's gradient_checkpointing), the loop body's model.
bool chain_model_covers_unstepped_plans(const CostGraph& graph);
// Whether the plans checkpointing each rollout step are searched exactly:
// where the rollout is a scanned loop (the loop body's model). Otherwise
// (PyTorch) they are the one-step frontier's, not searched exhaustively.
bool step_checkpoints_searched_exactly(const CostGraph& graph);

class ChainModel {
 public:
  // `loop`: predict the plan inside each step's checkpoint of that loop,
  // on `graph` at rollout min(loop->rollout, 3).
  ChainModel(const CostGraph& graph, const Device& device, std::optional<LoopBody> loop = std::nullopt);

  int stage_count() const { return rg_.stage_count; }
  int class_count() const { return static_cast<int>(class_steps_.size()); }
  int class_of(int step) const {
    if (step == 0) return 0;
    return step == steps_ - 1 ? class_count() - 1 : 1;
  }
  // The gradients in flight at boundary p of the backward pass (stages >= p
  // done): those of tensors made before stage p and used from p on, as
  // their bytes, in a fixed order. Two equal boundaries behave alike.
  std::vector<std::int64_t> boundary(int c, int p, const GradState& state) const;
  // How many rollout steps are of class c, and the step replayed for it.
  int class_steps(int c) const { return class_multiplicity_[static_cast<std::size_t>(c)]; }
  const CostGraph& graph() const { return rg_.graph; }

  // ---- executions of one stage s with B edge blocks, in step class c ----
  // Plain at the top level: forward (saving) and backward.
  // Backward-bearing executions take the sizes of the gradients flowing in
  // (signature(): in the order of the stage's incoming gradients).
  // `pending`: with pending work waiting, which the recomputation of an
  // edge block may run (Effect::backward_ran_pending).
  const Effect& plain(int c, int s, std::int64_t blocks, const std::vector<std::int64_t>& in = {},
                      bool pending = false);
  // Original forward inside a top-level region from `a`. Forward fields only.
  const Effect& region_forward(int c, int s, std::int64_t blocks, int a);
  // Recomputation inside region [a, b] as a plain child (saving), and its
  // backward. `pending`: with pending work waiting, which an op of the
  // recomputation may run (ran_pending).
  const Effect& recompute_plain(int c, int s, std::int64_t blocks, int a, int b,
                                const std::vector<std::int64_t>& in = {}, bool pending = false);
  // Recomputation inside region [a, b] as part of inner region from
  // `inner_from` (not saving). Forward fields only.
  const Effect& recompute_in_inner(int c, int s, std::int64_t blocks, int a, int b, int inner_from,
                                   bool pending = false);
  // What running the pending work does (zero unless some plain stage's
  // Effect::leaves_pending).
  const PendingEffect& pending_effect() const { return pending_effect_; }
  // Whether a top-level region's plain children may run work ahead
  // (Effect::ahead_*).
  bool runs_ahead() const { return runs_ahead_; }
  // Inside inner region [c0, d]: its recomputation (saving) and backward.
  const Effect& inner_recompute(int c, int s, std::int64_t blocks, int c0, int d,
                                const std::vector<std::int64_t>& in = {});
  // The incoming gradient sizes of stage s (class c) given what is in flight.
  std::vector<std::int64_t> signature(int c, int s, const GradState& state) const;
  static void hand_over(const Effect& e, GradState& state) {
    for (const auto& [key, bytes] : e.outgoing) {
      const auto it =
          std::lower_bound(state.begin(), state.end(), key, [](const auto& entry, int k) { return entry.first < k; });
      if (it != state.end() && it->first == key)
        it->second = bytes;
      else
        state.insert(it, {key, bytes});
    }
  }
  // Bytes of the activations used in stages [from, to] of a step of class
  // c that were made by stages [made_from, made_before) of the same step
  // (made_from -1: earlier steps too), i.e. what a checkpoint over [from, to]
  // keeps of them.
  std::int64_t kept_bytes(int c, int from, int to, int made_from, int made_before) const;
  // Of those, the ones a top-level region lets go before its end, at their
  // last reader (read by one stage, kept_input_reader_stage()): a plain
  // child's replay lets go of its own, the end of an inner region of its
  // readers; 0 where the engine keeps them to the end.
  std::int64_t released_before_end(int c, int from, int to, int made_from, int made_before) const;

  // Context bounds that replay alike for stage s: norm_lo(s, a) is the
  // least producer stage of s's inputs (or s) at or after a; norm_hi(s, b)
  // the greatest consumer stage of its outputs (or s) at or before b. The
  // executions above depend on a region's bounds only through these.
  int norm_lo(int s, int a) const;
  int norm_hi(int s, int b) const;
  // The same for a run of stages [from, to] inside region [a, b]: every
  // execution of those stages depends on (a, b) only through these, and so
  // does kept_bytes(c, from, to, a, from).
  std::pair<int, int> norm_bounds(int from, int to, int a, int b) const;

  // ---- plan conditions (solver_replay.h) ----
  // The stages whose edge updates, in blocks, change a conditioned op of
  // an earlier stage (blocked_edge_readers(): empty where none does). The
  // stages a conditioned op reaches are upward closed among these, so what
  // a plan changes follows from the last of them it blocks: the model's
  // condition (-1: none), which every execution above assumes.
  // predict() sets it from its plan; the search runs once per condition,
  // that stage blocked and the later ones not (SearchContext::choices()).
  const std::vector<int>& condition_stages() const { return condition_stages_; }
  int condition() const { return condition_; }
  void set_condition(int last_blocked_reader) { condition_ = last_blocked_reader; }
  // The last of condition_stages() that `plan` runs in blocks, or -1.
  int condition_of(const Plan& plan) const;

  // ---- the first stage's work run ahead at the top level ----
  // Whether the first stage has some: plain at the top level, it is then
  // differentiated right after the last stage's segment (its plain
  // replay's Effect::ahead_*, the rest its backward). What it frees
  // depends on whether the stage's edge update runs in blocks (a blocked
  // update's checkpoint keeps what it reads), so the search runs once per
  // condition: the first stage in a region, plain in one block, or plain
  // in blocks (the work folded into the last segment:
  // top_level_ahead_effect()); predict() sets it from its plan.
  enum class FirstStage { in_region, plain, plain_blocked };
  bool has_top_level_ahead() const { return has_top_level_ahead_; }
  FirstStage first_stage() const { return first_stage_; }
  void set_first_stage(FirstStage condition) { first_stage_ = condition; }
  bool ahead_hoisted() const { return has_top_level_ahead_ && first_stage_ != FirstStage::in_region; }
  // That work's effect in class c with `blocks` for the first stage,
  // given the gradients in flight as it runs.
  Piece top_level_ahead_effect(int c, std::int64_t blocks, const GradState& grads);

  // The loss pseudo-stage of class c.
  const Effect& loss(int c, const std::vector<std::int64_t>& in = {});
  // Step-time contributions: one forward execution of stage s, and of its
  // edge update (means over the rollout's steps).
  double stage_forward_s(int s) const { return stage_time_s_[static_cast<std::size_t>(s)]; }
  double edge_forward_s(int s) const { return edge_time_s_[static_cast<std::size_t>(s)]; }

  std::int64_t static_bytes() const { return static_bytes_; }
  // The rollout's steps (the loop's, for a loop body).
  int steps() const { return loop_ ? static_cast<int>(loop_->rollout) : steps_; }
  const std::optional<LoopBody>& loop() const { return loop_; }

  // The composed prediction for a plan (for a loop body: the plan inside
  // every step's checkpoint); it sets the condition to the plan's.
  struct Prediction {
    std::int64_t peak_bytes = 0;
    // Step time added to the plan "none" (for a loop body: beyond the step
    // checkpoint's own recomputation, the same for every plan).
    double recompute_s = 0;
  };
  Prediction predict(const Plan& plan);

 private:
  void set_step_classes();
  void find_stage_neighbours();
  void measure_stage_times(const Device& device);
  // StageContext::condition_bits of stage s in class c under the
  // condition.
  std::uint32_t condition_bits(int c, int s) const;
  const std::vector<Item>& items(int step, int stage, std::int64_t blocks);
  // A recomputation of stage s that saves (then its backward) in the
  // context of stages [lo, hi] (normalised here); `kind` keys the cache.
  const Effect& saving_recompute(int c, int s, std::int64_t blocks, int kind, int lo, int hi, bool hold_outputs,
                                 const std::vector<std::int64_t>& in, bool pending = false, bool runs_ahead = false);
  // The context's pending work: waiting, or not.
  void set_pending(StageContext& ctx, bool pending) const;
  Effect run(int c, int s, std::int64_t blocks, StageContext ctx, const std::vector<std::int64_t>& in);
  // The replay of a stage in a context (incoming gradients sorted), once.
  const StageRun& replay(int c, int stage, std::int64_t blocks, const StageContext& ctx);
  // What a replay depends on: the class, the stage, its blocks and the
  // fields of its context that vary (first_parameter_gradients follows
  // from the class).
  struct ReplayKey {
    int step_class = 0, stage = 0;
    std::int64_t blocks = 1;
    bool original_forward = true;
    int context_lo = 0, context_hi = 0;
    bool saving = true;
    int held_before = -1;
    bool in_region = false, hold_outputs = false;
    std::vector<std::pair<TensorId, std::int64_t>> incoming_grads;
    bool pending = false;
    bool runs_ahead = false;
    std::uint32_t condition_bits = 0;
    auto operator<=>(const ReplayKey&) const = default;
  };
  std::map<ReplayKey, StageRun> replays_;
  std::vector<std::vector<StageTranslate>> translates_;  // per class, per stage
  // What an execution's effect depends on besides the incoming gradient
  // sizes: the class, the stage, its blocks, which execution it is (`kind`,
  // solver_model.cpp) and the normalised context bounds that kind has
  // (0 where it has none), and the copies the condition drops (set by
  // cached()).
  struct EffectKey {
    int step_class = 0, stage = 0;
    std::int64_t blocks = 1;
    int kind = 0;
    int lo = 0, hi = 0, inner_from = 0;
    bool pending = false;
    std::uint32_t condition_bits = 0;
    auto operator<=>(const EffectKey&) const = default;
  };
  // The effect of execution `key` given the incoming gradient sizes `in`,
  // replayed in `ctx` once.
  const Effect& cached(EffectKey key, const std::vector<std::int64_t>& in, StageContext ctx);

  ReplayGraph rg_;
  std::optional<LoopBody> loop_;
  int steps_ = 1;                        // of the graph
  std::vector<int> class_steps_;         // representative step per class
  std::vector<int> class_multiplicity_;  // steps per class
  std::int64_t static_bytes_ = 0;
  PendingEffect pending_effect_;  // measured by the replay that left it
  bool runs_ahead_ = false;
  std::vector<int> condition_stages_;
  int condition_ = -1;
  bool has_top_level_ahead_ = false;
  FirstStage first_stage_ = FirstStage::in_region;
  std::vector<double> stage_time_s_, edge_time_s_;
  std::vector<std::int64_t> edges_;
  TensorState scratch_;  // the replays' (one at a time)
  // Items per (blocks) schedule: [step][stage] (stage_count = loss items).
  std::map<std::int64_t, std::vector<std::vector<std::vector<Item>>>> items_;
  std::map<EffectKey, std::map<std::vector<std::int64_t>, Effect>> cache_;  // by context, then incoming gradient sizes
  std::vector<std::vector<int>> input_producers_, output_consumers_;        // per stage, sorted, same step
  std::vector<std::vector<int>> key_stage_;  // per class: tensor key -> producer stage in that step, -1: none
  // kept_bytes() and released_before_end() (last) by their arguments.
  mutable std::map<std::tuple<int, int, int, int, int, bool>, std::int64_t> kept_cache_;
  std::int64_t kept_bytes_of(int c, int from, int to, int made_from, int made_before, bool last_reader_only) const;
};

}  // namespace actmem::detail

#pragma once
// The solver's stage-level cost model: replays ONE stage of one rollout step
// on the simulator's engine (memory_machine.h) in a given checkpoint
// context and measures what it does to device memory, relative to the
// memory just before it runs.
//
// The simulator's peak decomposes over these measurements (docs/solver.md):
// every buffer a stage touches is either made by the stage, an input made
// by an earlier stage (freed by the stage unless something holds it longer),
// or a gradient flowing in from a later stage. A context says which of those
// holders exist; the op-level rules are the engine's, the same the
// simulator runs. Tests check the composition against simulate() plan by
// plan.
//
// Cross-stage effects. Where the engine's rules run work of one stage at
// another stage's time, a replay reports it in one of three forms, which
// the solver composes without knowing the rule behind it:
// - pending work: a stage's backward leaves work waiting (its effect
//   measured, PendingEffect), which a later execution sets off or the
//   backward pass's end runs (the engine's deferred ops, J32);
// - work run ahead: part of a stage's recomputation and backward run
//   before the rest of its region's recomputation, or at the top level as
//   the last segment's backward ends (complete branches, J33 and J36);
// - plan conditions: a stage's buffers depend on how a later stage runs
//   (which later edge updates are in blocks, J35), given as condition bits
//   per stage; the search runs once per condition.

#include <cstdint>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "cost/memory_profile.h"
#include "simulate/memory_machine.h"
#include "simulate/schedule.h"

namespace actmem::detail {

// Memory effect of one execution, relative to the memory before it.
struct StageEffect {
  std::int64_t peak_bytes = 0;   // highest memory reached (>= 0: the start counts)
  std::int64_t delta_bytes = 0;  // memory after minus memory before
};

// How a stage runs. Stages are indices into CostGraph::stages().
struct StageContext {
  // Liveness context: [context_lo, context_hi] are the stages whose forward
  // runs in the same execution (the whole step for the original forward
  // pass, a region's stages for its recomputation). Tensors made before
  // context_lo are not made here: held by a checkpoint, never freed by use.
  bool original_forward = true;
  int context_lo = 0;
  int context_hi = 0;
  // Ops keep what backward needs, and edge blocks keep their inputs
  // (checkpoints keep inputs at the saving level only).
  bool saving = true;
  // Inputs made before stage `held_before` of this step (earlier steps
  // included) are held by an enclosing checkpoint beyond this stage, so
  // using them frees nothing. -1: none is.
  int held_before = -1;
  // Backward (only after a saving execution):
  // The stage runs inside a region's backward, so blocked edge updates hold
  // their recomputed output through each block's backward (nested
  // checkpoints, where the framework does that).
  bool in_region = false;
  // The stage is a child of a nested region whose recomputation keeps its
  // outputs (those used outside [context_lo, context_hi]) until the nested
  // region's backward ends: reported as released_at_end_bytes.
  bool hold_outputs = false;
  // Parameter gradients not yet allocated (the first rollout step to run
  // backward, i.e. the last one) are allocated and stay; otherwise each
  // parameter gradient is a transient.
  bool first_parameter_gradients = true;
  // Gradient buffers that exist when the stage's backward starts (of its
  // outputs, and of inputs used again later), by tensor: their bytes. A
  // gradient handed over by a later stage may be a view that keeps a larger
  // buffer alive (a slice of a concat's gradient), so its size is part of
  // the boundary between stages. Tensors not listed: the tensor's size.
  std::vector<std::pair<TensorId, std::int64_t>> incoming_grads;
  // Pending work left by an earlier stage's replay waits: the op of this
  // execution that sets it off (the engine decides which) runs it first,
  // with pending_effect's peak and delta.
  bool pending = false;
  PendingEffect pending_effect;
  // The recomputation of a top-level region outside a scanned loop: work
  // of the stage the engine runs ahead of the region's recomputation is
  // recomputed and differentiated first (StageRun::ahead), and the
  // region's hold on an input this stage alone reads ends at its last
  // reader.
  bool runs_ahead = false;
  // The plan condition: bit i set where the stage's i-th conditioned op
  // (ReplayGraph::condition_index) reaches a later stage whose edge update
  // runs in blocks (ChainModel::condition()).
  std::uint32_t condition_bits = 0;

  // The recomputation of stages [lo, hi] of a region (not the original
  // forward pass); everything else as the defaults.
  static StageContext recomputation(int lo, int hi) {
    StageContext ctx;
    ctx.original_forward = false;
    ctx.context_lo = lo;
    ctx.context_hi = hi;
    return ctx;
  }
};

struct StageRun {
  StageEffect forward;
  StageEffect backward;                    // zero unless ctx.saving
  std::int64_t released_at_end_bytes = 0;  // freed when the enclosing nested region ends (hold_outputs)
  // Loss stage: what the start of the backward pass does to memory for this
  // step (its gradient seed allocated, the held loss released).
  std::int64_t backward_prelude_bytes = 0;
  // Gradient buffers the backward hands to earlier stages (of inputs made
  // before this stage), by tensor: their bytes.
  std::vector<std::pair<TensorId, std::int64_t>> outgoing_grads;
  // The stage's backward left pending work waiting (counted in
  // backward.delta_bytes): running it does `pending_effect`.
  bool leaves_pending = false;
  PendingEffect pending_effect;
  // With ctx.pending: the forward execution ran it; the backward did (an
  // edge block's recomputation, in a stage outside every region).
  bool ran_pending = false;
  bool backward_ran_pending = false;
  // With ctx.runs_ahead: the work the stage runs ahead, recomputed and
  // differentiated before the region's recomputation (zero where it has
  // none; `forward` and `backward` are then the rest's); and whether that
  // ran the pending work (then `ran_pending` is false).
  StageEffect ahead;
  bool ahead_ran_pending = false;
  // Plain at the top level: work the stage runs ahead, differentiated as
  // the whole step's last segment's backward ends, its effect in `ahead`;
  // `backward` is then the rest's.
  bool ahead_at_top_level = false;
};

// Facts about the whole graph the replay needs, computed once.
struct ReplayGraph {
  // `loop_body`: the step replayed is the body of XLA's scanned loop (a
  // rollout step under its own checkpoint, recomputed in the backward
  // loop), which follows the loop body's rules (MemoryProfile, J14).
  explicit ReplayGraph(const CostGraph& graph, bool loop_body = false);
  const CostGraph& graph;
  MemoryProfile profile;
  bool loop_body = false;
  // That step's kept inputs are in host memory (Plan::host_offload).
  bool host_offload = false;
  int stage_count = 0;      // stages of one step; the loss is stage_count
  std::vector<int> op_key;  // per op: step * (stage_count + 1) + stage (chain order)
  // Per tensor, from CostGraph::lifetime(): op_key of its producer and of
  // its last use, the largest of its consumers' (both -1 for inputs and
  // parameters, whose uses are no edges of the DAG; last use -1 for an
  // activation nothing reads).
  std::vector<int> producer_key;
  std::vector<int> last_use_key;
  std::vector<char> has_grad;  // per tensor: backward gives it a gradient
  // Per (step, stage) of the chain (loss = stage_count): tensors whose
  // gradient exists when the stage's backward starts, sorted.
  std::vector<std::vector<std::vector<TensorId>>> incoming;
  // Per tensor: an identity shared by the same tensor in every rollout step
  // (its producer's position within the step's ops, and output index); -1
  // for inputs and parameters.
  std::vector<int> local_key;
  // Per tensor read by two or more stages besides its producer's (JAX's
  // rollout carry: the step's encoder and its next carry): the key of the
  // first reader whose read keeps it until its own backward (its read saves
  // it, or a checkpoint keeps it); -1 where none does or it has one reader.
  // For a reader after that one the tensor is held; that reader frees it
  // in its backward. Where no read keeps it, the last reader lets it go.
  std::vector<int> first_reader_key;
  // Plan conditions: per (step, stage), the ops whose buffers depend on
  // which later edge updates run in blocks (conditioned_ops()), in op
  // order; per op, its index among them (-1: none) and those later stages.
  std::vector<std::vector<std::vector<OpId>>> conditioned_ops;
  std::vector<int> condition_index;
  std::vector<std::vector<int>> condition_reach;
  int key(int step, int stage) const { return step * (stage_count + 1) + stage; }

 private:
  void find_gradients();
  void find_local_keys();
  void find_incoming();
  void find_first_readers();
  void find_conditioned_ops();
};

// Replays stage `stage` of rollout step `step` (stage == stage_count: the
// loss ops), whose items (one stage of a schedule, edge update blocked or
// not) are `items`: its forward execution in `ctx` and, when ctx.saving,
// its backward right after. `state` is scratch the replay resets as it
// needs (sized to the graph's tensors; reused across replays).
StageRun replay_stage(const ReplayGraph& rg, const std::vector<Item>& items, int step, int stage,
                      const StageContext& ctx, TensorState& state);

}  // namespace actmem::detail

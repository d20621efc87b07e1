#pragma once
// The memory rules of a training step, op by op (docs/cost-model.md): one
// engine that both the simulator (a whole step, simulator.cpp) and the
// solver's stage replay (one stage in a checkpoint context,
// solver_replay.cpp) run, so the two cannot drift apart.
//
// It executes schedule items (schedule.h) forward and backward over
// reference-counted buffers: a tensor's buffer is freed when its last
// holder lets go (a forward consumer still to run in the context that made
// it, an op that saved it, a checkpoint that keeps it, a gradient that
// aliases it). Gradients are allocated and accumulated by the framework's
// rules (memory_profile.h). What a user of the engine adds, it adds through
// the hooks: the simulator accounts time and records where the peak is;
// the replay only needs the peak.
//
// One class, implemented in parts by kind of knowledge: memory_machine.cpp
// (the rule-free core: buffers, contexts, forward execution),
// memory_machine_backward.cpp (backward execution, gradients),
// memory_machine_lowering.cpp (which buffers exist and their bytes),
// memory_machine_retention.cpp (what an op keeps for its backward),
// memory_machine_backward_order.cpp (backward ops out of reverse order),
// memory_machine_scanned_rollout.cpp (what a scanned rollout's loops hold)
// and memory_machine_edge_block_sample.cpp (XLA's order of an edge
// update's blocked backward).

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/simulate/report.h"
#include "cost/memory_profile.h"
#include "simulate/edge_block_backward.h"
#include "simulate/schedule.h"

namespace actmem::detail {

// An edge update's MLP, as XLA's order of its blocks' backward describes it
// (memory_machine_edge_block_sample.cpp).
struct EdgeMlp;

enum Category { kActivations, kGradients, kWorkspace, kCategories };

// Whether `op` is a LayerNorm over the mesh edges, their count a multiple
// of 8, that keeps a layout copy of its input under `profile` (J31).
bool aligned_edge_norm(const CostGraph& graph, const MemoryProfile& profile, OpId op);
// The stages of the edge updates that what `op` makes reaches through the
// LayerNorms and residual adds after it (its own edge update's LayerNorm is
// walked through, not counted; the walk stops at an edge update): sorted,
// distinct.
std::vector<int> edge_update_stages_reached(const CostGraph& graph, OpId op);
// Of those, the stages after `op`'s own: whose blocks J35 is about (read
// off later stages' edge updates; where one edge set's count equals the
// mesh edges', a LayerNorm its own stage's edge update reads keeps its
// copy).
std::vector<int> later_edge_update_stages_reached(const CostGraph& graph, OpId op);
// J35's readers: the stages whose edge updates, run in blocks, drop some
// aligned LayerNorm's copy (sorted), where `profile` drops them and each
// such LayerNorm's later reach is upward closed among them, so that the
// copies a plan drops follow from the last reader it blocks; else none
// (then J35 does not apply: where mesh nodes and mesh edges are equally
// many, a node LayerNorm reaching the decoder would break it).
std::vector<int> blocked_edge_readers(const CostGraph& graph, const MemoryProfile& profile);
// Whether top-level regions run work ahead of their recomputation (a
// stage's complete branch, J33), as MemoryMachine::backward_region() does:
// outside scanned loops (`loop_body`) and rollouts that stack residuals.
bool top_level_regions_run_ahead(const MemoryProfile& profile, const RunOptions& run, bool loop_body);
// Whether a nested region holds its recomputed outputs through its own
// backward (PyTorch's reentrant checkpoint).
bool nested_regions_hold_outputs(const MemoryProfile& profile);
// The ops whose buffers depend on which later stages run their edge updates
// in blocks (a plan condition for the solver: the aligned LayerNorms whose
// copies blocked readers drop, J35), in op order, each with those later
// stages (sorted); none where `profile` drops no copies.
std::vector<std::pair<OpId, std::vector<int>>> conditioned_ops(const CostGraph& graph, const MemoryProfile& profile);
// The target `op` reads, if it is a step's loss over a target input; else -1.
TensorId step_target(const CostGraph& graph, const Op& op);
// A step's float32 target (an input the loss reads) as XLA:TPU's scanned
// loops lay it out, in its tiles: DeepMind's per-variable arrays of a model
// on a latitude–longitude grid as the argument lays them out (the tensor's
// own bytes, J26), else node-major with the nodes minor (J14, J39).
std::int64_t scanned_target_bytes(const CostGraph& graph, TensorId target);
// J37: the one stage that reads activation t (all its readers in one stage
// of one step, and its producer saves nothing of it), where `profile` lets
// a checkpoint's hold on t go at its last reader; else -1.
int kept_input_reader_stage(const CostGraph& graph, const MemoryProfile& profile, TensorId t);

// The machine's state per tensor of the graph. A fresh one is what a step
// starts from; one stage's replay reads and writes only the entries of its
// own ops' tensors, so a replay resets those (reset()) and reuses the rest.
struct TensorState {
  TensorState() = default;
  TensorState(std::size_t tensors, bool first_parameter_gradients);
  void reset(const std::vector<TensorId>& tensors, bool first_parameter_gradients);
  std::vector<int> current, grad, uses, produced_in;
  std::vector<char> block_internal, block_output, param_grad_done;
};

// Pending work: what the engine leaves waiting at the end of a backward
// and runs where a later execution sets it off (today the deferred ops of
// the last stage's edge embedding, J32; MemoryMachine::run_pending()). Its
// effect relative to the memory just before it runs: its peak and its net
// change; and the bytes an op of a region's recomputation must write to
// set it off.
struct PendingEffect {
  std::int64_t threshold = 0, peak = 0, delta = 0;
};

// Whether an item of a region runs before the rest of the region's
// backward: the complete branch of its stage, or an ancestor of one
// recomputed with it (J33); else late, in reverse order with the rest.
enum class EarlyRole : char { late, early_ancestor, early_branch };

// How a user runs the engine (MemoryMachine::set_up(), once, before it
// runs): the defaults are a whole step's forward and backward.
struct MachineSetup {
  // The step runs as the body of XLA's scanned backward loop: a rollout
  // step under its own checkpoint, recomputed in the backward loop (J14).
  bool loop_body = false;
  // A step checkpoint of a scanned rollout keeps its inputs in host memory
  // (Plan::host_offload): the forward loop offloads them, each loop body
  // brings its step's back.
  bool offload_step_inputs = false;
  // In a rollout that stacks residuals, XLA orders the module depth-first,
  // so the backward loop's body computes the parameter gradients last
  // (MemoryProfile::depth_first_parameter_gradients_last, J52).
  bool parameter_gradients_last = false;
  // Equal edge blocks are run in bulk; off: every block runs op by op (a
  // timeline wants a row per op).
  bool bulk_equal_blocks = true;
  // Per stage: whether its edge update runs in blocks (empty: none does,
  // or J35 does not apply: blocked_edge_readers()).
  std::vector<char> blocked_edge_stages;
  // The deferred ops (J32) are left to the caller as the outermost
  // backward ends (a stage's replay: StageRun::leaves_pending), not run.
  bool pending_left_to_caller = false;
  // What running the deferred ops an earlier stage's replay left waiting
  // does, applied where this execution sets them off (then
  // ran_pending_elsewhere()); none: nothing waits elsewhere.
  std::optional<PendingEffect> pending_elsewhere;
};

class MemoryMachine {
 public:
  // On `shared` (entries reset by the caller), or on a fresh state of its own.
  explicit MemoryMachine(const CostGraph& graph, TensorState* shared = nullptr);
  MemoryMachine(const MemoryMachine&) = delete;
  MemoryMachine& operator=(const MemoryMachine&) = delete;
  virtual ~MemoryMachine() = default;

 protected:
  // One allocation. `refs` counts its holders; it is freed at 0.
  struct Buffer {
    std::int64_t bytes = 0;
    int refs = 0;
    Category category = kActivations;
    TensorId tensor = -1;                // what it holds or is the gradient of, for diagnostics (-1: scratch)
    bool compiler_recomputable = false;  // an activation the compiler may recompute (OpMemoryRule)
    bool stacked = false;                // residuals a rollout's loop stacks (J11), named after their op
    std::int64_t defined_at = 0;         // allocated_bytes_ once it was allocated: its place in a step (J54)
  };

  // ---- hooks ----
  // An op's forward (or recomputation) ran over `scale` of its rows (a
  // block's share; scale may cover several equal blocks at once), and an
  // op's backward.
  virtual void on_forward(const Op& op, double scale, Pass pass) = 0;
  virtual void on_backward(const Op& op, double scale) = 0;
  // Memory as it stands inside an op (its outputs, or its gradients and
  // scratch, allocated), inside the concat of an edge update's blocks, and
  // at a transient within the op last sampled (a gradient sum).
  virtual void sample_op(Pass pass, const Op& op, int block) = 0;
  virtual void sample_concat(Pass pass, const Item& blocks) = 0;
  virtual void sample_transient() = 0;
  // The compute cost of the block just replayed, repeated for `count`
  // equal blocks that were not (a simulator accounts their time here).
  // A rollout step's loop body (Item::loop_body) starts its recomputation,
  // what the loop holds around it allocated.
  virtual void on_loop_body_start() {}
  // The top level's complete branch (J36) has been differentiated.
  virtual void on_top_level_ahead_done() {}
  virtual void mark_block_cost() {}
  virtual void repeat_block_cost(std::int64_t /*count*/) {}

  // ---- buffers ----
  int allocate(std::int64_t bytes, Category category, int refs, TensorId tensor = -1);
  Buffer& buffer(int id) { return buffers_[static_cast<std::size_t>(id)]; }
  const Buffer& buffer(int id) const { return buffers_[static_cast<std::size_t>(id)]; }
  void release(int id);
  void retain(int id) { ++buffer(id).refs; }
  std::int64_t live() const { return live_[kActivations] + live_[kGradients] + live_[kWorkspace]; }
  // Of live(): activations the compiler may recompute, less those `op`
  // reads or writes now (it cannot do without them).
  std::int64_t live_compiler_recomputable(const Op* op) const;
  // Every live buffer, largest first (diagnostics).
  std::vector<PeakBuffer> live_buffers() const;

  int& current(TensorId t) { return current_[static_cast<std::size_t>(t)]; }
  int current(TensorId t) const { return current_[static_cast<std::size_t>(t)]; }
  int& grad(TensorId t) { return grad_[static_cast<std::size_t>(t)]; }
  int grad(TensorId t) const { return grad_[static_cast<std::size_t>(t)]; }
  const Tensor& tensor(TensorId t) const { return g_.tensor(t); }

  // ---- contexts ----
  // A context is one forward execution of a list of items: the whole step,
  // or the recomputation of one region or block. uses_ counts, for tensors
  // made in the context, the consumers in it still to run; for
  // block-internal tensors it is the (constant) count per block instance.
  void begin_context(const std::vector<Item>& items);
  void mark_produced(const std::vector<Item>& items);
  void count_uses(const std::vector<Item>& items, std::int64_t repeat);
  bool made_here(TensorId t) const { return produced_in_[static_cast<std::size_t>(t)] == context_; }

  // ---- a rollout without step checkpoints (J11) ----
  // From now on the forward pass's ops outside every checkpoint stack
  // their linearization residuals (OpMemoryRule::linearization), held until
  // release_stacked_residuals(), instead of keeping what they save; in the
  // backward pass the linears among them hold their output gradients to
  // the end of their step's backward.
  void stack_linearization_residuals();
  void release_stacked_residuals();
  // Before the backward pass of such a rollout, with the step's schedule:
  // the loop body's copies of hoisted residuals (J25), released with the
  // stacks.
  void hold_hoisted_norm_residual_copies(const std::vector<Item>& items);

  // ---- pending work: the last stage's edge-embedding backward, deferred (J32) ----
  // Its ops' backward after its LayerNorm's, when the last stage (the one
  // that maps onto the output: GraphCast's decoder) runs outside every
  // checkpoint, waits (holding what they save and their outputs'
  // gradients) until an op of a region's recomputation writes more than
  // `deferred_threshold_` bytes (deferred_set_off()), or until the
  // outermost backward() ends.
  bool has_pending() const { return !deferred_.empty(); }
  void run_pending();
  std::int64_t pending_threshold() const { return deferred_threshold_; }
  // Whether this execution ran them where an earlier stage's replay left
  // them waiting (MachineSetup::pending_elsewhere).
  bool ran_pending_elsewhere() const { return ran_pending_elsewhere_; }

  // ---- a region's complete branches, first (J33) ----
  // Per item of `items` (a top-level region's children, or one stage's
  // items of them): its EarlyRole. `in_region(op)`: op runs in the region
  // (the ops of `items` do).
  std::vector<EarlyRole> early_roles(const std::vector<Item>& items, const std::function<bool(OpId)>& in_region) const;

  // ---- the top level's complete branch, as the last stage's backward ends (J36) ----
  // Outside every checkpoint and scanned loop (and not in a step that
  // stacks residuals), the plain ops of a stage before the last (the one
  // that maps onto the output: GraphCast's decoder) whose outputs only the
  // last stage or other such ops read (early_roles() with the last stage
  // taken as after the region: GraphCast's encoder's grid-node update) are
  // differentiated as soon as the backward of the items holding the last
  // stage's ops has run: before the item just before them (`before`;
  // items.size() where `items` hold no op of the last stage, as in a
  // stage's replay: first). take_top_level_branch() takes their saved tensors off
  // saved_; the branch's ops come in backward order.
  struct TopLevelBranch {
    std::vector<char> in_branch;  // per item
    std::vector<std::pair<OpId, std::vector<int>>> ops;
    std::size_t before = 0;
  };
  TopLevelBranch take_top_level_branch(const std::vector<Item>& items);
  void run_top_level_branch(TopLevelBranch& branch);

  // ---- a rollout without step checkpoints: its backward loop's slices (J45) ----
  // As step `step`'s backward starts (top-level `items` of the rollout):
  // per item, a copy of the step's slice of each stacked input the item's
  // checkpoint keeps, let go as the item's backward ends.
  std::vector<std::vector<int>> slice_kept_inputs(const std::vector<Item>& items, int step);

  // ---- a top-level checkpoint's kept inputs, let go at their last reader (J37) ----
  // Of `inputs` (live, held by the checkpoint), those kept_input_reader_stage()
  // allows that items of `items` read, with how many items read each (an
  // inner region that reads one keeps it itself to its backward's end).
  struct LastReaders {
    std::vector<TensorId> tensors;
    std::vector<int> remaining;
  };
  LastReaders last_readers(const std::vector<Item>& items, const std::vector<TensorId>& inputs) const;
  // Whether one of `ops` reads t.
  bool any_reads(const std::vector<OpId>& ops, TensorId t) const;
  // Recomputes `items` (saving) one after another, letting go of the
  // checkpoint's hold on each of `readers` after the last item that reads
  // it: its buffer in kept_inputs_[kept_entry] (the checkpoint's), or the
  // one reference a stage's replay gives it (kept_entry -1).
  void recompute_items(const std::vector<Item>& items, std::int64_t block_rows, int block, LastReaders& readers,
                       std::ptrdiff_t kept_entry);

  // ---- the loop body's slice of its step's target (J44) ----
  // As a scanned backward loop's body starts: the slice of the step's
  // target, if `step_ops` hold its loss and the profile slices it
  // (target_slice_); backward_op() lets it go after the loss's backward.
  void slice_step_target(const std::vector<OpId>& step_ops);

  // ---- J31's copies an edge update in blocks does away with (J35) ----
  // Whether one of conditioned_ops(), `op`, reaches a later stage whose
  // edge update runs in blocks (then its copy is dropped): by default, as
  // MachineSetup::blocked_edge_stages says (a whole step's plan); a stage's
  // replay knows it from its plan condition.
  virtual bool reaches_blocked_stage(OpId op) const;

  // ---- execution ----
  // `saving`: ops keep what the framework keeps for backward (false inside
  // a checkpoint during the forward pass).
  void forward(const std::vector<Item>& items, bool saving, std::int64_t block_rows, int block, Pass pass);
  void forward_item(const Item& item, bool saving, std::int64_t block_rows, int block, Pass pass);
  void backward(const std::vector<Item>& items, std::int64_t block_rows, int block);
  // A checkpoint keeps its inputs until its backward, from the execution at
  // the saving level: the forward pass for top-level regions, the parent's
  // recomputation for nested ones.
  void keep_inputs(bool saving, const std::vector<TensorId>& inputs, std::int64_t blocks = 1);
  // The backward pass's seeds an op gives, before any backward runs:
  // d(loss)/d(loss) = 1 for a step's loss, and the zero cotangent of a carry
  // that nothing reads (the one JAX's scan computes at its last step and
  // discards), which XLA's backward loop holds as its state (docs/journal.md J9).
  void seed_gradients(const Op& op);
  // Parameter t's gradient, made now and resident until the optimizer step
  // (its first contribution's buffer; later ones are summed into it).
  void hold_parameter_gradient(TensorId t);

  // Whether XLA's depth-first order's choice of which weight gradients
  // inside checkpoints wait (J54) needs the bytes each step's backward
  // allocates, which a run measures (step_backward_bytes()) for the next
  // one (assume_step_backward_bytes()).
  bool weight_gradients_by_operand_depth() const {
    return parameter_gradients_last_ && profile_.depth_first_weight_gradients_by_operand_depth;
  }
  // After a run: per rollout step, the bytes its backward allocated.
  const std::vector<std::int64_t>& step_backward_bytes() const { return step_backward_bytes_; }
  void assume_step_backward_bytes(std::vector<std::int64_t> bytes) { assumed_step_backward_bytes_ = std::move(bytes); }
  // A loop body whose step's inputs came back from host memory (J47, J48).
  bool in_offloaded_body() const { return in_loop_body_ && offload_step_inputs_; }

  // ---- control: how a user of the engine sets it up and steers it ----
  // Once, before anything runs.
  void set_up(MachineSetup setup);
  bool offloads_step_inputs() const { return offload_step_inputs_; }
  std::int64_t live(Category category) const { return live_[category]; }
  // Whether parameter t's gradient is made (the first contribution came).
  bool parameter_gradient_made(TensorId t) const { return param_grad_done_[static_cast<std::size_t>(t)] != 0; }
  // The losses the forward pass handed over, let go (the backward starts).
  void release_losses();
  // For a user that runs part of a step (the solver's stage replay): its
  // execution as one context, the tensors made in it and the uses of
  // each by consumers still to run.
  void begin_part();
  void mark_made_here(TensorId t) { produced_in_[static_cast<std::size_t>(t)] = context_; }
  int uses(TensorId t) const { return uses_[static_cast<std::size_t>(t)]; }
  void add_use(TensorId t) { ++uses_[static_cast<std::size_t>(t)]; }
  // The forward execution of `items`: a region's recomputation (its ops set
  // deferred ops off, J32) or not, and the step's recomputation in a loop
  // body (J29) or not.
  void forward_part(const std::vector<Item>& items, bool saving, Pass pass, bool region_recomputation,
                    bool step_recomputation);
  // A top-level region's recomputation of `items`, letting go of the
  // checkpoint's hold on `readers` at their last reader (J37).
  void recompute_part(const std::vector<Item>& items, LastReaders& readers);
  // The backward of `items`, inside a region's backward or at the top level.
  void backward_part(const std::vector<Item>& items, bool in_region);

  const CostGraph& g_;
  const MemoryProfile profile_;

 private:
  std::int64_t live_[kCategories] = {0, 0, 0};
  std::int64_t live_recomputable_ = 0;
  TensorState own_;
  std::vector<int>&current_, &grad_, &uses_, &produced_in_;
  std::vector<char>&block_internal_, &block_output_, &param_grad_done_;
  std::vector<int> losses_;  // held by the caller until backward
  int context_ = 0;
  int context_count_ = 0;
  int region_depth_ = 0;  // regions whose backward is under way
  // Inside the recomputation and backward of a rollout step's checkpoint:
  // the body of XLA's scanned backward loop (J14).
  bool in_loop_body_ = false;
  // A step checkpoint of a scanned rollout keeps its inputs in host memory
  // (Plan::host_offload): the forward loop offloads them, each loop body
  // brings its step's back (fetch_offloaded_inputs()).
  bool offload_step_inputs_ = false;
  // In a rollout that stacks residuals, XLA orders the module depth-first,
  // so the backward loop's body computes the parameter gradients last
  // (MemoryProfile::depth_first_parameter_gradients_last, J52).
  bool parameter_gradients_last_ = false;
  // In that loop body, the step checkpoint's own recomputation (not that of
  // a checkpoint inside the step, J29).
  bool recomputing_step_ = false;
  // Equal edge blocks are run in bulk (forward_blocks()); off: every block
  // runs op by op (a timeline wants a row per op).
  bool bulk_equal_blocks_ = true;
  // Nonzero: memory is not sampled (the blocks' backward, when XLA's order
  // of it was sampled instead, J17).
  int quiet_ = 0;
  // The setup's pending work (J32), and whether this execution ran it.
  bool run_pending_at_end_ = true;
  std::optional<PendingEffect> pending_elsewhere_;
  bool ran_pending_elsewhere_ = false;
  // Regions whose recomputation (forward) is under way: only their ops set
  // the deferred ops off.
  int recompute_depth_ = 0;
  // backward_op() lets it go (slice_step_target()).
  int target_slice_ = -1;
  std::vector<char> blocked_edge_stages_;  // MachineSetup::blocked_edge_stages
  std::int64_t bytes_of(TensorId t, std::int64_t block_rows) const;
  std::int64_t gradient_bytes_of(TensorId t, std::int64_t block_rows) const;
  std::int64_t output_bytes(const Op& op, const OpMemoryRule& rule, TensorId t, std::int64_t block_rows) const;
  double block_scale(const Op& op, std::int64_t block_rows) const;
  void forward_op(OpId id, bool saving, std::int64_t block_rows, int block, Pass pass);
  void save(TensorId t, std::vector<int>& saved);
  void stack_residuals(OpId id);
  void hold_stacked(std::int64_t bytes, TensorId named_after);
  // In the forward pass of a rollout that stacks residuals: a
  // loop-invariant op after the first step, whose output and residuals are
  // the first step's (JAX and XLA hoist it out of the loop).
  bool hoisted(OpId id, Pass pass) const;
  static OpId first_op(const Item& item);
  void release_weight_gradient_operands();
  void begin_step_backward(int ended_step);
  bool off_chain_gradient(Category category, TensorId t) const;
  std::vector<int> weight_gradient_inputs(const Op& op, const std::vector<int>& saved) const;
  bool weight_gradient_waits(const Op& op, const std::vector<int>& inputs) const;
  bool linear_input_recomputed(OpId reader, TensorId input, Pass pass) const;
  bool read_by_edge_update(OpId op) const;
  // J31's layout copy of a mesh-edge LayerNorm's input: none, one that
  // dies as the LayerNorm ends, or one kept for its backward.
  enum class NormCopy { none, transient, kept };
  NormCopy norm_copy(OpId id, Pass pass) const;
  std::int64_t transient_input_copies(OpId id, Pass pass, NormCopy norm) const;
  void save_for_backward(OpId id, Pass pass, NormCopy norm);
  // Retention as a chain of named save policies (kSavePolicies, in order),
  // each deciding part of what op `op` keeps for its backward.
  struct SaveQuery {
    OpId op;
    Pass pass;
    NormCopy norm;
  };
  struct SaveDecision {
    std::uint32_t inputs = 0, outputs = 0;  // bits: the inputs and outputs saved
    bool layout_copy = false;               // a LayerNorm's copy of its input
    bool stacked = false;                   // stacked by a scanned loop instead (nothing saved)
  };
  struct SavePolicy {
    const char* name;
    void (MemoryMachine::*decide)(const SaveQuery&, SaveDecision&) const;
  };
  static const std::array<SavePolicy, 4> kSavePolicies;
  void derivative_residuals(const SaveQuery& q, SaveDecision& d) const;
  void weight_gradient_recomputes_input(const SaveQuery& q, SaveDecision& d) const;
  void norm_keeps_layout_copy(const SaveQuery& q, SaveDecision& d) const;
  void scan_stacks_residuals(const SaveQuery& q, SaveDecision& d) const;
  std::vector<int> hold_loop_body_step_inputs(const Item& step);
  void keep_inputs_offloaded(bool saving, const std::vector<TensorId>& inputs);
  void fetch_offloaded_inputs();
  // Whether linear `op` writes the step's prediction (the loss reads it).
  bool writes_prediction(OpId op) const;
  void release_input(TensorId t);
  void release_holds(const Op& op);
  std::int64_t input_gradient(const Op& op, const OpMemoryRule& rule, TensorId t, std::int64_t block_rows);
  std::int64_t fused_input_gradient(TensorId t, std::int64_t block_rows);
  void forward_blocks(const Item& item, bool saving, Pass pass);
  int skip_forward_blocks(const Item& item, std::int64_t block_rows, std::int64_t count, Pass pass);
  void backward_region(const Item& item, std::int64_t block_rows, int block);
  void recompute_and_backward(const Item& region, std::int64_t block_rows, int block, int outer_context);
  void backward_blocks(const Item& item);
  void backward_blocks_in_turn(const Item& item);
  bool sample_xla_blocked_backward(const Item& item);
  EdgeBlockSizes edge_block_sizes(const EdgeMlp& mlp, const Item& item) const;
  int edge_block_start_buffer(const EdgeMlp& mlp, EdgeBlockValue value) const;
  void sample_edge_block_place(const EdgeMlp& mlp, const EdgeBlockPeak& place);
  bool held_past_blocks(TensorId t, const Item& item) const;
  void backward_op(OpId id, std::int64_t block_rows, int block);
  void backward_op(OpId id, std::vector<int> saved, std::int64_t block_rows, int block);
  bool off_chain(OpId id) const;
  bool deferrable(OpId id) const;
  std::int64_t bytes_written(const Op& op, const OpMemoryRule& rule, std::int64_t block_rows) const;
  void deferred_set_off(const Op& op, const OpMemoryRule& rule, std::int64_t block_rows);
  bool made_fused(TensorId t) const;
  bool compiler_recomputable(TensorId t) const;
  void release_kept(std::int64_t blocks, bool skipped);
  void drop_references(int id, std::int64_t count);

  std::vector<Buffer> buffers_;
  std::vector<int> free_slots_;
  std::vector<std::vector<int>> saved_;  // per saving op execution, in forward order
  // Inputs kept by checkpoint executions, in forward order: the buffers,
  // and for how many equal blocks (one reference each).
  struct Kept {
    std::vector<int> buffers;
    std::int64_t blocks = 1;
    // A step checkpoint's kept inputs in host memory (offload_step_inputs_):
    // each tensor and its bytes, on the device again as its body starts.
    std::vector<std::pair<TensorId, std::int64_t>> offloaded;
  };
  std::vector<Kept> kept_inputs_;
  // stack_linearization_residuals(): the stacks, the activations already
  // in them, and the ops that read only what every step shares.
  bool stacking_residuals_ = false;
  std::vector<int> stacked_;
  std::vector<OpId> stacked_ops_;  // the ops whose residuals are stacked
  std::vector<char> tensor_stacked_, loop_invariant_;
  // What the step's parameter gradients read, held to its backward's end:
  // its linears' output gradients (J11), and the gradients of fused
  // concatenations with a hoisted op's part, read through that part (J52).
  std::vector<int> held_weight_gradient_operands_;
  // Bytes allocated over the run (Buffer::defined_at), where the backward
  // of the step under way began, and per step the bytes its backward
  // allocated: measured, and as assumed from a run before (J54).
  std::int64_t allocated_bytes_ = 0, step_backward_from_ = 0;
  std::int64_t off_chain_bytes_ = 0;                // allocated off the chain, counted as the step's backward ends
  std::vector<std::int64_t> region_backward_from_;  // allocated_bytes_ as each region's backward under way began
  // Edge blocks under way: what they allocate is not counted, since equal
  // blocks run in bulk (bulk_equal_blocks_) allocate less than block by
  // block, and the positions must not depend on how blocks are run.
  int edge_blocks_depth_ = 0;
  struct InEdgeBlocks {
    explicit InEdgeBlocks(int& depth) : depth_(depth) { ++depth_; }
    ~InEdgeBlocks() { --depth_; }
    InEdgeBlocks(const InEdgeBlocks&) = delete;
    InEdgeBlocks& operator=(const InEdgeBlocks&) = delete;
    int& depth_;
  };
  std::vector<std::int64_t> step_backward_bytes_, assumed_step_backward_bytes_;
  // The deferred ops (J32), in the order their backward runs, with what
  // each saved.
  struct Deferred {
    OpId op;
    std::vector<int> saved;
  };
  std::vector<Deferred> deferred_;
  std::int64_t deferred_threshold_ = 0;
  // Blocks' input gradients held until the blocks' backward is done
  // (MemoryProfile::block_input_gradients_held), innermost blocks last.
  std::vector<int> held_block_gradients_;
  bool collecting_block_output_ = false;
  // Contributions of one op's backward (scratch, reused).
  struct Contribution {
    TensorId tensor;
    int buffer;
    bool sliced;
    // A part of `buffer` (a fused concat's gradient) of these bytes; 0: all of it.
    std::int64_t part_bytes = 0;
  };
  std::vector<Contribution> contributions_;
  void accumulate(const Contribution& c);
};

}  // namespace actmem::detail

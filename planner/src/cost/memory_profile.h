#pragma once
// What a run's framework keeps for the backward pass, op by op, and how its
// backward pass allocates gradients: the engine's view of the memory rules
// (actmem/cost/memory_rules.h). A field's default is what the derivatives
// alone imply; each rule that applies to the run sets the fields it names
// (memory_rules.cpp), so a field a rule switched off stays at its default.

#include <cstdint>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/run_options.h"

namespace actmem {

struct OpMemoryRule {
  std::uint32_t saved_inputs = 0;   // bit i: input i is kept for the backward pass
  std::uint32_t saved_outputs = 0;  // bit i: output i is kept for the backward pass
  // true: the gradients of the inputs are the output's gradient itself or
  // views of it (add passes it through, concat splits it, XLA's SiLU
  // applies its derivative where that gradient is made); false: backward
  // allocates a fresh gradient of each input's full size.
  bool grads_alias_output = false;
  // With grads_alias_output: the inputs' gradients are slices of the
  // output's (concat), not the output's gradient itself (add).
  bool grads_are_slices = false;
  // false: the output is fused into its consumer and never gets a buffer.
  bool output_materialized = true;
  // ≥ 0: output 0's buffer has the size of this input (PyTorch's CPU
  // mse_loss returns a 0-d view of its elementwise buffer).
  int output_sized_like_input = -1;
  // Extra buffers of input 0's size alive only inside this op's backward
  // (PyTorch's index_select backward: zeros, then an out-of-place index_add).
  int backward_scratch_copies = 0;
  // ≥ 0: at batch > 1 a copy of this input is alive while the op runs
  // (XLA:TPU lays the messages an aggregation reads out batch-major and
  // copies them row-major for its scatter, J24).
  int batched_copy_of_input = -1;
  // The compiler may recompute the output instead of keeping it, when a
  // program is over its memory limit: it is cheap, and what it reads is
  // live anyway (XLA:TPU's rematerialisation recomputes gathers, SiLU and
  // residual adds; docs/journal.md, J7).
  bool compiler_recomputable = false;
  // What JAX's linearization of the op keeps, its residuals as the jaxpr
  // names them before XLA fuses anything, which the forward loop of a
  // rollout without step checkpoints stacks for the ops outside every
  // checkpoint (docs/journal.md J11): the activation inputs in
  // `inputs`, each a buffer of its own in the activation dtype (a fused
  // concatenation too); `output_copies` more of output 0's size; float32
  // buffers of input 0's shape (`float32_input_copies`) and
  // `float32_per_row` float32 values per row of input 0.
  struct LinearizationResiduals {
    std::uint32_t inputs = 0;
    int output_copies = 0;
    int float32_input_copies = 0;
    int float32_per_row = 0;
  } linearization;
};

struct MemoryProfile {
  Framework framework = Framework::pytorch;
  OpMemoryRule rules[kOpKindCount];  // indexed by OpKind
  // How a gradient contribution meets an existing gradient buffer: true
  // (PyTorch) a fresh sum, so old, new and sum coexist for a moment; false
  // accumulated in place (XLA).
  bool accumulate_out_of_place = false;
  // Slices of a gradient are views that keep the whole gradient alive
  // (PyTorch), or copies of their own size unless their consumer is fused
  // (XLA, which has no views).
  bool slices_are_views = false;
  // A nested checkpoint's recomputation keeps the region's outputs until its
  // backward is done (PyTorch's reentrant checkpoint, used for nested regions
  // because a nested non-reentrant one saves nothing in torch 1.13).
  bool nested_recompute_keeps_outputs = false;
  // Bytes per parameter of copies in the activation dtype held for the whole
  // step (JAX casts the float32 masters to bfloat16 once; PyTorch's autocast
  // casts each weight in the forward pass and its cache holds every cast
  // until the forward pass ends).
  std::int64_t parameter_cast_bytes = 0;
  // A program over this fraction of the memory the device has for programs
  // makes the compiler recompute what it can (compiler_recomputable ops);
  // it compiles if that gets it under (XLA:TPU: 1.0; its rematerialisation
  // pass aims at 95%, but the whole compile takes a program up to all of
  // it, J7). 0: the framework does not rematerialise on its own.
  double compiler_remat_limit_fraction = 0;
  // Edge blocks: each block's gradient of its fused MLP input (the concat:
  // the gathered node features' and the edge latent's parts) stays live
  // until every block's backward is done, where XLA combines the blocks'
  // scatter-adds (J8); false: each block's is consumed and freed in turn.
  bool block_input_gradients_held = false;
  // Edge blocks: the peak of their backward pass is that of XLA's order of
  // the instructions XLA makes of them (simulate/edge_block_backward.h,
  // J17), not of running them one after another.
  bool blocks_backward_list_scheduled = false;
  // In the body of XLA's scanned backward loop (a rollout step under its
  // own checkpoint): a linear whose input is a SiLU's output does not keep
  // it, the loop body recomputes it for the weight gradient from h (J10,
  // J14); and the body holds, through the step's backward, the step's grid
  // input concatenation in the activation dtype and a float32 copy of one
  // carried frame's cotangent (J14).
  bool loop_body_recomputes_silu = false;
  bool loop_body_holds_step_inputs = false;
  // With loop_body_recomputes_silu: except the MLP that writes the
  // prediction (the output MLP, the loss reads its second linear's output):
  // its recomputation writes silu(h) beside h and its second linear keeps
  // silu(h) for the weight gradient (J43).
  bool loop_body_output_mlp_keeps_silu = false;
  // That loop body slices its step's float32 target out of the loops' copy
  // (scanned_loops_copy_targets) as it starts, in the same tiled layout,
  // and holds the slice until the loss's backward has read it (J44).
  bool loop_body_slices_step_target = false;
  // A linear whose input is a SiLU's output never keeps it: XLA:TPU
  // recomputes it from h for the weight gradient everywhere under float32
  // (J13), where under bfloat16 only the loop body does.
  bool linears_recompute_silu_input = false;
  // A linear whose input is a LayerNorm's output never keeps it: XLA:TPU
  // recomputes it for the weight gradient from the LayerNorm's input and
  // statistics, which the LayerNorm keeps (J41).
  bool linears_recompute_norm_input = false;
  // On a latitude–longitude grid (DeepMind's per-variable targets, J26)
  // the loss reads the last input frame's predicted channels and the
  // prediction plus that residual as two float32 arrays in the targets'
  // tiled layout, live while it runs (J42).
  bool loss_lays_out_prediction = false;
  // Forward pass: an MLP whose output an edge update reads (through its
  // LayerNorm and residual add) does not keep its SiLU's output either;
  // XLA recomputes it from h, as under float32 (J27).
  bool edge_update_inputs_recompute_silu = false;
  // With loop_body_recomputes_silu: only the step's own recomputation
  // does; the checkpoints inside the step keep SiLU's output as outside
  // the loop (J29).
  bool loop_body_inner_checkpoints_keep_silu = false;
  // Edge blocks (J17's instructions): every block's recomputation writes
  // SiLU's output beside h, and the second weight gradient reads it (J28);
  // false: only the block the backward reaches last.
  bool every_edge_block_writes_silu = false;
  // Edge blocks in a scanned rollout's loop body: the block whose
  // second-weight product the Adam update computes (the first reached)
  // writes h alone, the update recomputing SiLU from h (J51).
  bool loop_body_updated_edge_block_writes_hidden_alone = false;
  // Edge blocks: a block's partial first-weight gradient is made after the
  // next block's second-linear backward (J30).
  bool edge_block_partials_after_next_block = false;
  // Edge blocks in a step whose kept inputs are in host memory
  // (Plan::host_offload), outside the step's inner checkpoints or inside
  // one: that loop body recomputes every block (gathers, edge slice, h and
  // SiLU(h), the norm's input) before any block's backward starts, holding
  // them all (J47).
  bool offloaded_step_blocks_recomputed_first = false;
  // A step checkpoint's float32 inputs that its loop body brings back from
  // host memory are held as a copy in the activation dtype, made as they
  // arrive, and the body holds no grid input of its own: its encoder's
  // backward assembles it again from that copy (J48).
  bool offloaded_inputs_fetched_in_activation_dtype = false;
  // The first step's carry, the scanned loops' copy of the frames argument
  // (scanned_loop_holds_first_carry), is slot 0 of the forward loop's
  // stacked step inputs: where those go to host memory (Plan::host_offload)
  // it goes with them as the forward loop ends, and step 0's loop body
  // brings it back as every step's body does its own (J49).
  bool offloaded_loop_moves_first_carry_to_host = false;
  // A LayerNorm over the mesh edges, where their count is a multiple of 8,
  // keeps a copy of its input in another layout besides the input (J31).
  bool aligned_edge_norms_copy_input = false;
  // With it: in a region's recomputation (a step-checkpointed loop
  // body's too, J38; not the backward loop of a rollout without step
  // checkpoints), the copy of the input of a LayerNorm whose output no edge
  // update reads dies as the LayerNorm ends, as in the forward pass (J34,
  // J40); without it, it is kept for the backward.
  bool unread_norm_copy_dies_at_norm = false;
  // With it: a LayerNorm whose output reaches, through the LayerNorms and
  // residual adds after it, an edge update that runs in blocks makes no
  // copy (J35).
  bool blocked_edge_updates_drop_norm_copies = false;
  // The decoder's edge embedding (an MLP of constant features, so its
  // backward makes only weight gradients), outside every checkpoint: its
  // backward after its LayerNorm's waits, holding what it reads, until a
  // region's recomputation writes more than the gradient into its hidden
  // layer, or the backward pass ends (XLA's list scheduler, J32; batch 1:
  // at batch 2 XLA runs it at once).
  bool constant_embedding_backward_deferred = false;
  // A top-level checkpoint's backward outside a scanned loop: a stage's
  // ops whose outputs only what runs after the region reads (a branch
  // whose gradient is complete when the region's backward starts, and
  // that needs nothing of another stage) are recomputed, with their
  // ancestors, and differentiated before the rest of the region is
  // recomputed (XLA's list scheduler, J33).
  bool complete_branch_backward_first = false;
  // In such a checkpoint's backward, an input it keeps that one stage
  // alone reads is let go after its last reader in the recomputation (what
  // the recomputation's ops saved of it holding it to their backward), not
  // when the region's backward ends (XLA frees a buffer at its last
  // reader, J37).
  bool kept_inputs_freed_at_last_reader = false;
  // The grid input a step assembles before the network (the frames, the
  // forcings and the static channels concatenated in the activation dtype:
  // the concat ops that read model inputs) is made outside every
  // checkpoint and held from the forward pass to the encoder's backward;
  // counted as held through the step, except in a scanned rollout, whose
  // loop body holds its own step's (J19, J14).
  bool step_input_held_through_step = false;
  // A rollout whose steps are each under a checkpoint runs as a scanned
  // loop (JAX's lax.scan under XLA): the solver searches those plans with
  // the loop body's chain model (solve/solver_model.h, docs/solver.md).
  // It relies on two facts of such a loop: checkpoints inside the step
  // behave as top-level ones (nested_recompute_keeps_outputs is false), and
  // the forward pass, which keeps only each step's inputs, is never the peak.
  bool step_checkpoint_scanned = false;
  // A rollout without step checkpoints at batch > 1: the body of XLA's
  // backward loop copies the stacked float32 intermediates of each hoisted
  // LayerNorm whose output a checkpoint keeps into another layout, and
  // holds the copies through the body, where the LayerNorm's rows per
  // sample are a multiple of 8 (J25).
  bool loop_body_copies_hoisted_norm_residuals = false;
  // A rollout without step checkpoints: as a step's backward starts, the
  // body of XLA's backward loop copies out the step's slice of each stacked
  // input a checkpoint of the step keeps (not a loop-invariant one, hoisted
  // rather than stacked), and holds each copy until that checkpoint's
  // backward ends (J45).
  bool loop_body_slices_kept_inputs = false;
  // A scanned rollout: XLA:TPU copies the float32 targets into the loops'
  // layout, in its tiles, and holds the copies through both loops: a
  // node-major target [nodes, batch, channels] with the nodes minor (J14,
  // J39), DeepMind's per-variable arrays of a model on a latitude–longitude
  // grid (lat_lon_shape, model.h) as the argument lays them out (J26).
  bool scanned_loops_copy_targets = false;
  // A scanned rollout: a copy of the forcings in the activation dtype, in
  // the loops' tiled layout, held through both loops (J39; read under
  // bfloat16, where the step concatenates them into its bfloat16 grid
  // input; under float32 the loops read the argument).
  bool scanned_loops_copy_forcings = false;
  // A scanned rollout holds, through both loops, a copy of the first
  // step's carry (the frames argument) in the carry's dtype besides the
  // later steps' carries (J20).
  bool scanned_loop_holds_first_carry = false;
  // A rollout XLA runs as scanned loops (rollout > 1, each step
  // checkpointed or not) holds every parameter's float32 gradient from
  // before its forward loop to the optimizer step: the backward loop's
  // state accumulates them, in buffers made before the forward loop (J50).
  bool scanned_loops_hold_parameter_gradients = false;
  // A rollout without step checkpoints runs as a scanned loop whose
  // forward stacks the linearization residuals (OpMemoryRule) of the ops
  // outside every checkpoint, once for ops that read only what every step
  // shares (hoisted out of the loop), and holds them to the end of the
  // backward loop, whose body computes those linears' weight gradients
  // after the rest of the step's backward, holding their output gradients
  // until then (J11).
  bool scan_stacks_linearization_residuals = false;
  // With it, where XLA orders the module depth-first (a rollout without
  // step checkpoints whose encoder and decoder are both outside every
  // checkpoint, simulate/xla_module_order.h), the backward loop's body
  // computes the parameter gradients after the step's input gradients
  // (J52): a linear inside a checkpoint holds its output gradient to the
  // end of its step's backward too (which of them, J54 refines), and
  // where the gradient of a hoisted op's output (a constant-feature
  // embedding's, which only parameter gradients read) is a part of a fused
  // concatenation's gradient, the whole is held as long.
  bool depth_first_parameter_gradients_last = false;
  // With it, which weight gradients of the linears inside checkpoints wait
  // follows XLA's depth-first scheduler (J54): it visits first the one
  // whose operands lie deepest in the step's backward, measured in the
  // bytes allocated before each. A linear whose operands (its saved
  // inputs and its output gradient) sum, in those positions, to less than
  // all its step's backward allocates holds them all to the step's end;
  // the others' weight gradients are computed as the chain passes, holding
  // nothing. Replaces J52's hold on the output gradients inside checkpoints.
  bool depth_first_weight_gradients_by_operand_depth = false;
  // With it, the forward loop stacks a linear's input in bfloat16 whatever
  // the activations' dtype: XLA:TPU's matmuls read float32 at their default
  // precision in bfloat16, and XLA converts the input before stacking it
  // (J53); residuals hoisted out of the loop keep the activations' dtype.
  bool scan_stacks_linear_inputs_in_bfloat16 = false;

  // Whether a run's forward pass stacks those residuals: a rollout without
  // a checkpoint around each step, under such a profile.
  bool stacks_linearization_residuals(const RunOptions& run, bool step_checkpoint) const {
    return scan_stacks_linearization_residuals && run.rollout > 1 && !step_checkpoint;
  }
  // Whether a run's loops hold the parameters' gradients from the start
  // (scanned_loops_hold_parameter_gradients): a rollout, under such a profile.
  bool holds_parameter_gradients_through_loops(const RunOptions& run) const {
    return scanned_loops_hold_parameter_gradients && run.rollout > 1;
  }

  const OpMemoryRule& rule(OpKind kind) const { return rules[static_cast<int>(kind)]; }
};

// The profile of a run: the derivatives' residuals, then every rule of the
// run's framework that applies to its dtype, batch and implementation
// (PyTorch: how it aggregates), but those in run.rules_off.
MemoryProfile memory_profile(const RunOptions& run, Implementation implementation);
// Whether `graph`'s rollout, each step checkpointed, runs as XLA's scanned
// loop (MemoryProfile::step_checkpoint_scanned, J6).
bool scans_checkpointed_steps(const CostGraph& graph);

// Sets in `profile` what each rule that applies to the run sets, but those
// in run.rules_off (memory_rules.cpp).
void apply_memory_rules(MemoryProfile& profile, const RunOptions& run, Implementation implementation);

// Whether `reader`'s read of t keeps t for the backward pass: it saves t, or
// it is fused into a consumer that saves its output.
bool read_saves(const CostGraph& graph, const MemoryProfile& profile, OpId reader, TensorId t);

}  // namespace actmem

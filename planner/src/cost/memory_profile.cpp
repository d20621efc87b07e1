#include "actmem/cost/memory_profile.h"

namespace actmem {
namespace {

constexpr std::uint32_t bit(int i) { return std::uint32_t{1} << i; }

OpMemoryRule& rule(MemoryProfile& p, OpKind kind) { return p.rules[static_cast<int>(kind)]; }

// Rules common to both frameworks: the residuals of each op's derivative.
void common_rules(MemoryProfile& p) {
  rule(p, OpKind::linear).saved_inputs = bit(0);      // x (the weight is a parameter)
  rule(p, OpKind::silu).saved_inputs = bit(0);        // x
  rule(p, OpKind::layer_norm).saved_inputs = bit(0);  // x, and mean/rstd
  rule(p, OpKind::layer_norm).saved_outputs = bit(1);
  rule(p, OpKind::layer_norm).grads_are_slices = true;
  rule(p, OpKind::concat).grads_alias_output = true;  // backward: slices of the gradient
  rule(p, OpKind::concat).grads_are_slices = true;
  rule(p, OpKind::add).grads_alias_output = true;         // backward: the gradient passes through
  rule(p, OpKind::mse_loss).saved_inputs = bit(0);        // prediction (the target is an input)
  rule(p, OpKind::next_input).grads_alias_output = true;  // a concat
  rule(p, OpKind::next_input).grads_are_slices = true;
  // gather and scatter_add keep only their index (an input); a cast keeps
  // nothing, and its backward casts the gradient back (a fresh buffer).
}

// PyTorch: measured on torch 1.13 and 2.10 (docs/pytorch-memory-profile.md, tables 1–2).
void pytorch_rules(MemoryProfile& p, DType dtype, Implementation implementation) {
  if (implementation == Implementation::deepmind) {
    // The reference's zeros(N, L).index_add(0, receivers, e) keeps its source e.
    rule(p, OpKind::scatter_add).saved_inputs = bit(2);
  } else {
    // PhysicsNeMo (torch_scatter.scatter) and anemoi (torch_geometric's
    // scatter) run zeros(N, L).scatter_add_(0, index.expand_as(e), e): in
    // place into the zeros, keeping only the index; its backward gathers
    // the gradient into a fresh [E, L] (docs/validation-trainers.md §1).
    rule(p, OpKind::zeros).output_materialized = false;
  }
  rule(p, OpKind::mse_loss).output_sized_like_input = 0;
  rule(p, OpKind::gather).backward_scratch_copies = 1;
  p.accumulate_out_of_place = true;
  p.nested_recompute_keeps_outputs = true;
  // bfloat16 is torch.autocast: the linears' inputs and the loss are cast
  // ops of the graph (models/graphcast_builder.cpp); the bfloat16 copies of
  // the weights are held from their cast in the forward pass to their
  // linear's backward, all of them at the end of the forward pass
  // (docs/pytorch-memory-profile.md, "CPU autocast to bfloat16").
  p.parameter_cast_bytes = dtype == DType::float32 ? 0 : element_bytes(dtype);
}

// JAX under XLA:TPU (docs/cost-model.md, J1–J32).
void jax_rules(MemoryProfile& p, DType dtype, std::int64_t batch) {
  // XLA:TPU fuses the concat of an MLP's input into the matmul that
  // consumes it: never materialised, its parts (materialised gathers) are
  // kept instead, and its gradient is one buffer of its size whose slices
  // its parts' gradients are (docs/cost-model.md, J1). The first linear's
  // fusion writes both its output and SiLU's (J2). The scatter accumulates
  // in place (no zeros buffer).
  rule(p, OpKind::concat).output_materialized = false;
  rule(p, OpKind::zeros).output_materialized = false;
  p.accumulate_out_of_place = false;
  p.slices_are_views = false;
  p.nested_recompute_keeps_outputs = false;
  p.parameter_cast_bytes = dtype == DType::float32 ? 0 : element_bytes(dtype);
  // Over its HBM, XLA:TPU recomputes these in the backward pass, and
  // compiles a program that gets under all of it (J7).
  p.compiler_remat_limit_fraction = 1.0;
  p.block_input_gradients_held = dtype == DType::bfloat16;
  p.blocks_backward_list_scheduled = true;  // float32 too: J13's trace has J17's shape
  // A scanned rollout's loop body (J14).
  p.loop_body_recomputes_silu = true;
  p.loop_body_holds_step_inputs = true;
  p.loop_body_output_mlp_keeps_silu = true;                  // J43
  p.loop_body_slices_step_target = true;                     // J44
  p.linears_recompute_silu_input = dtype == DType::float32;  // J13
  p.linears_recompute_norm_input = true;                     // J41
  p.grid_loss_lays_out_prediction = true;                    // J42
  // DeepMind's program keeps the batch axis at batch 1 ([N, 1, C]); XLA
  // lays those arrays out, fuses and orders them otherwise than the
  // batch-major ones of batch > 1 (J27–J32, read off batch 1; J28 holds at
  // batch 2 too).
  const bool one_sample = batch == 1;
  p.edge_update_inputs_recompute_silu = one_sample;           // J27
  p.every_edge_block_writes_silu = dtype == DType::bfloat16;  // J28
  p.loop_body_inner_checkpoints_keep_silu = one_sample;       // J29
  p.edge_block_partials_after_next_block = one_sample;        // J30
  p.offloaded_step_blocks_recomputed_first = true;            // J47
  p.offloaded_inputs_fetched_in_activation_dtype = true;      // J48
  p.offloaded_loop_moves_first_carry_to_host = true;          // J49
  p.aligned_mesh_edge_norms_copy_input = one_sample;          // J31
  p.unread_norm_copy_dies_at_norm = true;                     // J34, J40
  p.blocked_edge_updates_drop_norm_copies = true;             // J35
  p.decoder_edge_embedding_backward_deferred = one_sample;    // J32
  p.complete_branch_backward_first = true;                    // J33
  p.kept_inputs_freed_at_last_reader = true;                  // J37

  // Read off batch 2 (J28 holds there but for this block).
  p.loop_body_updated_edge_block_writes_hidden_alone = !one_sample;  // J51

  p.step_checkpoint_scanned = true;
  // Read off bfloat16 modules (J19); no float32 module was read for it.
  p.grid_input_held_through_step = dtype == DType::bfloat16;
  p.scanned_loops_copy_targets = true;                       // J14, J26, J39
  p.scanned_loops_copy_forcings = dtype == DType::bfloat16;  // J39
  p.scanned_loop_holds_first_carry = true;                   // J20
  p.scanned_loops_hold_parameter_gradients = true;           // J50
  rule(p, OpKind::gather).compiler_recomputable = true;
  rule(p, OpKind::silu).compiler_recomputable = true;
  // SiLU's derivative is applied in the fusion that makes its output's
  // gradient (the second linear's input gradient): the first linear's
  // output gradient is that buffer, SiLU's never another. Under float32
  // SiLU itself is computed from h inside the second linear's fusions,
  // forward and backward, and never written (J21); under bfloat16 the
  // first linear's fusion writes it (J2).
  rule(p, OpKind::silu).grads_alias_output = true;
  rule(p, OpKind::silu).output_materialized = dtype == DType::bfloat16;
  rule(p, OpKind::add).compiler_recomputable = true;
  // At batch > 1 the scatter aggregating an edge update reads a row-major
  // copy of its messages (input 2), made as it starts (J24).
  rule(p, OpKind::scatter_add).batched_copy_of_input = 2;
  // JAX's residuals, read off its jaxprs (jax.ad_checkpoint.print_saved_residuals
  // of one MLP; integrations/jax/scan_residuals.py of a rollout, J11): a
  // linear keeps its input; SiLU its input and three buffers of its output's
  // size (one of them the output the next linear reads); LayerNorm three
  // float32 intermediates of its input's shape and two float32 values a
  // row, not its input; the loss the float32 difference. Gathers and
  // scatters keep their index, a model input.
  p.scan_stacks_linearization_residuals = true;
  p.depth_first_parameter_gradients_last = true;           // J52
  p.depth_first_weight_gradients_by_operand_depth = true;  // J54
  p.scan_stacks_linear_inputs_in_bfloat16 = true;          // J53
  p.loop_body_copies_hoisted_norm_residuals = true;        // J25
  p.loop_body_slices_kept_inputs = true;                   // J45
  rule(p, OpKind::linear).linearization = {bit(0), 0, 0, 0};
  rule(p, OpKind::silu).linearization = {bit(0), 2, 0, 0};
  rule(p, OpKind::layer_norm).linearization = {0, 0, 3, 2};
  rule(p, OpKind::mse_loss).linearization = {0, 0, 1, 0};
}

}  // namespace

MemoryProfile memory_profile(const RunOptions& run, Implementation implementation) {
  MemoryProfile p;
  p.framework = run.framework;
  common_rules(p);
  if (run.framework == Framework::pytorch)
    pytorch_rules(p, run.dtype, implementation);
  else
    jax_rules(p, run.dtype, run.batch);
  return p;
}

bool read_saves(const CostGraph& graph, const MemoryProfile& profile, OpId reader, TensorId t) {
  const Op& op = graph.op(reader);
  const OpMemoryRule& rule = profile.rule(op.kind);
  for (std::size_t i = 0; i < op.inputs.size(); ++i)
    if (op.inputs[i] == t && (rule.saved_inputs & (1u << i))) return true;
  if (rule.output_materialized) return false;
  for (OpId d : graph.consumers(op.outputs.front()))
    if (read_saves(graph, profile, d, op.outputs.front())) return true;
  return false;
}

}  // namespace actmem

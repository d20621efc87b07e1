#include "actmem/cost/memory_rules.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "actmem/util/error.h"
#include "actmem/util/suggest.h"
#include "cost/memory_profile.h"

namespace actmem {
namespace {

constexpr std::uint32_t bit(int i) { return std::uint32_t{1} << i; }

OpMemoryRule& op(MemoryProfile& p, OpKind kind) { return p.rules[static_cast<int>(kind)]; }

using DTypes = RuleCondition::DTypes;
using Batches = RuleCondition::Batches;
using Aggregation = RuleCondition::Aggregation;
constexpr RuleCondition kAlways{};
constexpr RuleCondition kBfloat16{DTypes::bfloat16};
constexpr RuleCondition kFloat32{DTypes::float32};
constexpr RuleCondition kOneSample{DTypes::any, Batches::one};
constexpr RuleCondition kSeveralSamples{DTypes::any, Batches::several};

// A rule: its card, and what it sets in the profile of a run it applies to.
struct MemoryRule {
  RuleCard card;
  void (*apply)(MemoryProfile& profile);
};

constexpr Framework jax = Framework::jax;
constexpr Framework pytorch = Framework::pytorch;

// The measurements behind each rule: docs/cost-model.md under its journal
// number; its card: docs/rules/<name>.md.
const std::array kRules = std::to_array<MemoryRule>({
    // XLA:TPU's fusion and layout.
    {{"xla.fusion.concat_into_matmul", jax, kAlways,
      "An MLP's input concatenation is fused into the matmul that reads it: never a buffer; its parts are kept "
      "instead, and its gradient is one buffer whose slices are the parts' gradients.",
      "J1, J3"},
     [](MemoryProfile& p) { op(p, OpKind::concat).output_materialized = false; }},
    {{"xla.scatter.accumulates_in_place", jax, kAlways,
      "An aggregation's scatter-add updates its accumulator in place: no zeros buffer.", "J1"},
     [](MemoryProfile& p) { op(p, OpKind::zeros).output_materialized = false; }},
    {{"xla.silu.gradient_fused", jax, kAlways,
      "SiLU's derivative is applied in the fusion that makes its output's gradient: the first linear's output "
      "gradient is that buffer, never another.",
      "J2, J21"},
     [](MemoryProfile& p) { op(p, OpKind::silu).grads_alias_output = true; }},
    {{"xla.silu.float32_output_not_written", jax, kFloat32,
      "Under float32 SiLU's output is never a buffer: the second linear's fusions compute it from h, forward and "
      "backward.",
      "J21"},
     [](MemoryProfile& p) { op(p, OpKind::silu).output_materialized = false; }},
    {{"xla.scatter.batched_messages_copied", jax, kSeveralSamples,
      "At batch > 1 an aggregation's scatter reads a row-major copy of its messages, alive while it runs.", "J24"},
     [](MemoryProfile& p) { op(p, OpKind::scatter_add).batched_copy_of_input = 2; }},
    {{"jax.parameters.cast_once_to_bfloat16", jax, kBfloat16,
      "The float32 parameters are cast to bfloat16 once, the copies held for the whole step.", "J5"},
     [](MemoryProfile& p) { p.parameter_cast_bytes = element_bytes(DType::bfloat16); }},
    {{"xla.remat.recomputes_over_limit", jax, kAlways,
      "A program over the device's memory makes XLA recompute gathers, SiLU outputs and residual adds until it "
      "fits, if that is enough.",
      "J7"},
     [](MemoryProfile& p) {
       p.compiler_remat_limit_fraction = 1.0;
       op(p, OpKind::gather).compiler_recomputable = true;
       op(p, OpKind::silu).compiler_recomputable = true;
       op(p, OpKind::add).compiler_recomputable = true;
     }},
    {{"xla.linears.recompute_silu_input", jax, kFloat32,
      "Under float32 a linear does not keep the SiLU output it reads: its weight gradient recomputes it from h.",
      "J13"},
     [](MemoryProfile& p) { p.linears_recompute_silu_input = true; }},
    {{"xla.linears.recompute_norm_input", jax, kAlways,
      "A linear does not keep the LayerNorm output it reads: its weight gradient recomputes it from the "
      "LayerNorm's input and statistics.",
      "J41"},
     [](MemoryProfile& p) { p.linears_recompute_norm_input = true; }},
    {{"xla.edge_update.inputs_recompute_silu", jax, kOneSample,
      "At batch 1 an MLP whose output an edge update reads does not keep its SiLU's output in the forward pass.",
      "J27"},
     [](MemoryProfile& p) { p.edge_update_inputs_recompute_silu = true; }},
    {{"xla.layer_norm.aligned_edges_copy_input", jax, kOneSample,
      "At batch 1 a LayerNorm over a multiple of 8 mesh edges keeps a copy of its input in another layout.", "J31"},
     [](MemoryProfile& p) { p.aligned_edge_norms_copy_input = true; }},
    {{"xla.layer_norm.unread_copy_dies_at_norm", jax, kAlways,
      "In a recomputation, the layout copy of a LayerNorm whose output no edge update reads dies as the LayerNorm "
      "ends, as in the forward pass.",
      "J34, J38, J40"},
     [](MemoryProfile& p) { p.unread_norm_copy_dies_at_norm = true; }},
    {{"xla.layer_norm.blocked_updates_drop_copies", jax, kAlways,
      "A LayerNorm whose output reaches an edge update run in blocks makes no layout copy.", "J35"},
     [](MemoryProfile& p) { p.blocked_edge_updates_drop_norm_copies = true; }},
    {{"xla.loss.lays_out_prediction", jax, kAlways,
      "On a latitude-longitude grid the per-variable loss holds the prediction and the last input frame's "
      "channels as two float32 arrays in the targets' tiles while it runs.",
      "J42"},
     [](MemoryProfile& p) { p.loss_lays_out_prediction = true; }},
    {{"xla.step.grid_input_held", jax, kBfloat16,
      "The step's grid input (frames, forcings and static channels concatenated in the activation dtype) is made "
      "outside every checkpoint and held to the encoder's backward.",
      "J19"},
     [](MemoryProfile& p) { p.step_input_held_through_step = true; }},

    // XLA's order of a step's backward pass.
    {{"xla.schedule.constant_embedding_backward_deferred", jax, kOneSample,
      "At batch 1 the backward of an edge embedding of constant features outside every checkpoint waits, holding "
      "what it reads, until a recomputation or the end of the backward pass.",
      "J32"},
     [](MemoryProfile& p) { p.constant_embedding_backward_deferred = true; }},
    {{"xla.schedule.complete_branch_backward_first", jax, kAlways,
      "In a top-level checkpoint's backward, a branch whose gradient is complete is recomputed and differentiated "
      "before the rest of the region.",
      "J33"},
     [](MemoryProfile& p) { p.complete_branch_backward_first = true; }},
    {{"xla.schedule.kept_inputs_freed_at_last_reader", jax, kAlways,
      "In a top-level checkpoint's backward, a kept input one stage alone reads is let go after its last reader "
      "in the recomputation.",
      "J37"},
     [](MemoryProfile& p) { p.kept_inputs_freed_at_last_reader = true; }},

    // Edge blocks as XLA compiles them.
    {{"xla.edge_blocks.input_gradients_held", jax, kBfloat16,
      "Under bfloat16 each edge block's gradient of its MLP input stays live until every block's backward is "
      "done.",
      "J8"},
     [](MemoryProfile& p) { p.block_input_gradients_held = true; }},
    {{"xla.edge_blocks.backward_list_scheduled", jax, kAlways,
      "The blocks' backward runs in the order of XLA's list scheduler over the instructions it makes of them, "
      "not one block after another.",
      "J17"},
     [](MemoryProfile& p) { p.blocks_backward_list_scheduled = true; }},
    {{"xla.edge_blocks.every_block_writes_silu", jax, kBfloat16,
      "Under bfloat16 every block's recomputation writes SiLU's output beside h for the second weight gradient.",
      "J28"},
     [](MemoryProfile& p) { p.every_edge_block_writes_silu = true; }},
    {{"xla.edge_blocks.partials_after_next_block", jax, kOneSample,
      "At batch 1 a block's partial first-weight gradient is made after the next block's second-linear backward.",
      "J30"},
     [](MemoryProfile& p) { p.edge_block_partials_after_next_block = true; }},
    {{"xla.edge_blocks.updated_block_writes_hidden_alone", jax, kSeveralSamples,
      "At batch > 1, in a scanned loop body, the block reached first writes h alone: the Adam update recomputes "
      "SiLU from h.",
      "J51"},
     [](MemoryProfile& p) { p.loop_body_updated_edge_block_writes_hidden_alone = true; }},

    // A rollout as XLA's scanned loops.
    {{"xla.scan.step_checkpoints_scanned", jax, kAlways,
      "A rollout whose steps are each under a checkpoint runs as a scanned loop: its checkpoints inside the step "
      "behave as top-level ones, and the solver searches it with the loop body's chain model.",
      "J6, J14"},
     [](MemoryProfile& p) { p.step_checkpoint_scanned = true; }},
    {{"xla.scan.copies_targets", jax, kAlways,
      "A scanned rollout holds a copy of the float32 targets in the loops' tiled layout through both loops.",
      "J14, J26, J39"},
     [](MemoryProfile& p) { p.scanned_loops_copy_targets = true; }},
    {{"xla.scan.copies_forcings", jax, kBfloat16,
      "Under bfloat16 a scanned rollout holds a bfloat16 copy of the forcings in the loops' layout through both "
      "loops.",
      "J39"},
     [](MemoryProfile& p) { p.scanned_loops_copy_forcings = true; }},
    {{"xla.scan.holds_first_carry", jax, kAlways,
      "A scanned rollout holds a copy of the first step's carry through both loops.", "J20"},
     [](MemoryProfile& p) { p.scanned_loop_holds_first_carry = true; }},
    {{"xla.scan.holds_parameter_gradients", jax, kAlways,
      "A rollout's loops hold every parameter's float32 gradient from before the forward loop to the optimizer "
      "step.",
      "J50"},
     [](MemoryProfile& p) { p.scanned_loops_hold_parameter_gradients = true; }},
    {{"xla.loop_body.recomputes_silu", jax, kAlways,
      "In a step-checkpointed loop body a linear does not keep the SiLU output it reads; the body holds the "
      "step's grid input and one frame's float32 cotangent.",
      "J10, J14"},
     [](MemoryProfile& p) {
       p.loop_body_recomputes_silu = true;
       p.loop_body_holds_step_inputs = true;
     }},
    {{"xla.loop_body.output_mlp_keeps_silu", jax, kAlways,
      "In a loop body the MLP that writes the prediction keeps SiLU's output for its second weight gradient.", "J43"},
     [](MemoryProfile& p) { p.loop_body_output_mlp_keeps_silu = true; }},
    {{"xla.loop_body.slices_step_target", jax, kAlways,
      "A loop body slices its step's float32 target out of the loops' copy and holds it until the loss's "
      "backward.",
      "J44"},
     [](MemoryProfile& p) { p.loop_body_slices_step_target = true; }},
    {{"xla.loop_body.inner_checkpoints_keep_silu", jax, kOneSample,
      "At batch 1 only the step's own recomputation drops SiLU's output; checkpoints inside the step keep it.", "J29"},
     [](MemoryProfile& p) { p.loop_body_inner_checkpoints_keep_silu = true; }},
    {{"xla.scan.stacks_residuals_outside_checkpoints", jax, kAlways,
      "A rollout without step checkpoints stacks, for each op outside every checkpoint, the residuals JAX's "
      "linearization names, and holds them to the end of the backward loop.",
      "J11"},
     [](MemoryProfile& p) {
       p.scan_stacks_linearization_residuals = true;
       // The residuals as the jaxpr names them: a linear keeps its input;
       // SiLU its input and two more buffers of its output's size;
       // LayerNorm three float32 intermediates of its input's shape and two
       // float32 values a row; the loss the float32 difference.
       op(p, OpKind::linear).linearization = {bit(0), 0, 0, 0};
       op(p, OpKind::silu).linearization = {bit(0), 2, 0, 0};
       op(p, OpKind::layer_norm).linearization = {0, 0, 3, 2};
       op(p, OpKind::mse_loss).linearization = {0, 0, 1, 0};
       // Attention's, as JAX's derivatives name them (not yet read off a
       // compiled transformer): a product keeps both operands, softmax
       // its output.
       op(p, OpKind::matmul).linearization = {bit(0) | bit(1), 0, 0, 0};
       op(p, OpKind::softmax).linearization = {0, 1, 0, 0};
     }},
    {{"xla.scan.stacks_linear_inputs_in_bfloat16", jax, kAlways,
      "The forward loop stacks a linear's input in bfloat16 whatever the activations' dtype.", "J53"},
     [](MemoryProfile& p) { p.scan_stacks_linear_inputs_in_bfloat16 = true; }},
    {{"xla.scan.parameter_gradients_last", jax, kAlways,
      "Where XLA orders the module depth-first, the backward loop's body computes the parameter gradients after "
      "the step's input gradients, holding their operands.",
      "J52"},
     [](MemoryProfile& p) { p.depth_first_parameter_gradients_last = true; }},
    {{"xla.scan.weight_gradients_by_operand_depth", jax, kAlways,
      "Which checkpointed linears' weight gradients wait to the step's end follows XLA's depth-first visit, by "
      "the depth of their operands.",
      "J54"},
     [](MemoryProfile& p) { p.depth_first_weight_gradients_by_operand_depth = true; }},
    {{"xla.scan.copies_hoisted_norm_residuals", jax, kSeveralSamples,
      "At batch > 1 the backward loop copies a hoisted LayerNorm's stacked float32 intermediates into another "
      "layout, where a checkpoint keeps its output.",
      "J25"},
     [](MemoryProfile& p) { p.loop_body_copies_hoisted_norm_residuals = true; }},
    {{"xla.scan.slices_kept_inputs", jax, kAlways,
      "As a step's backward starts, the backward loop copies out the step's slice of each stacked input a "
      "checkpoint keeps, held until that checkpoint's backward ends.",
      "J45"},
     [](MemoryProfile& p) { p.loop_body_slices_kept_inputs = true; }},

    // A rollout whose per-step state is in host memory (Plan::host_offload).
    {{"xla.host_offload.blocks_recomputed_first", jax, kAlways,
      "An offloaded loop body recomputes every edge block before any block's backward, holding them all.", "J47"},
     [](MemoryProfile& p) { p.offloaded_step_blocks_recomputed_first = true; }},
    {{"xla.host_offload.inputs_fetched_in_activation_dtype", jax, kAlways,
      "An offloaded loop body holds the frames it brings back as a copy in the activation dtype, and no grid "
      "input of its own.",
      "J48"},
     [](MemoryProfile& p) { p.offloaded_inputs_fetched_in_activation_dtype = true; }},
    {{"xla.host_offload.first_carry_moves_to_host", jax, kAlways,
      "An offloaded rollout's copy of the first carry goes to host memory with the stacked step inputs.", "J49"},
     [](MemoryProfile& p) { p.offloaded_loop_moves_first_carry_to_host = true; }},

    // PyTorch's eager autograd (docs/pytorch-memory-profile.md, docs/validation-trainers.md).
    {{"torch.index_add.keeps_source",
      pytorch,
      {DTypes::any, Batches::any, Aggregation::index_add},
      "index_add keeps its source (the updated edges) for the backward pass.",
      "docs/pytorch-memory-profile.md"},
     [](MemoryProfile& p) { op(p, OpKind::scatter_add).saved_inputs = bit(2); }},
    {{"torch.scatter.in_place_into_zeros",
      pytorch,
      {DTypes::any, Batches::any, Aggregation::scatter_add_into_zeros},
      "scatter_add_ writes into its zeros in place: no separate accumulator buffer.",
      "docs/validation-trainers.md §1"},
     [](MemoryProfile& p) { op(p, OpKind::zeros).output_materialized = false; }},
    {{"torch.mse_loss.holds_elementwise_buffer", pytorch, kAlways,
      "mse_loss's 0-d result is a view that holds a prediction-sized buffer.", "docs/pytorch-memory-profile.md"},
     [](MemoryProfile& p) { op(p, OpKind::mse_loss).output_sized_like_input = 0; }},
    {{"torch.gather.backward_scratch_copy", pytorch, kAlways,
      "index_select's backward makes zeros of its source's size, then an out-of-place index_add: one scratch copy.",
      "docs/pytorch-memory-profile.md"},
     [](MemoryProfile& p) { op(p, OpKind::gather).backward_scratch_copies = 1; }},
    {{"torch.gradients.accumulate_out_of_place", pytorch, kAlways,
      "A gradient contribution meets an existing gradient as a fresh sum: old, new and sum coexist for a moment.",
      "docs/pytorch-memory-profile.md"},
     [](MemoryProfile& p) { p.accumulate_out_of_place = true; }},
    {{"torch.slices_are_views", pytorch, kAlways, "Slices of a gradient are views that keep the whole gradient alive.",
      "docs/pytorch-memory-profile.md"},
     [](MemoryProfile& p) { p.slices_are_views = true; }},
    {{"torch.checkpoint.nested_keeps_outputs", pytorch, kAlways,
      "A nested (reentrant) checkpoint's recomputation keeps the region's outputs until its backward is done.",
      "docs/pytorch-memory-profile.md"},
     [](MemoryProfile& p) { p.nested_recompute_keeps_outputs = true; }},
    {{"torch.autocast.caches_weight_casts", pytorch, kBfloat16,
      "Autocast's cache holds every weight's bfloat16 cast from the forward pass to its linear's backward.",
      "docs/pytorch-memory-profile.md"},
     [](MemoryProfile& p) { p.parameter_cast_bytes = element_bytes(DType::bfloat16); }},
});

const std::array<RuleCard, kRules.size()> kCards = [] {
  std::array<RuleCard, kRules.size()> cards;
  for (std::size_t i = 0; i < kRules.size(); ++i) cards[i] = kRules[i].card;
  return cards;
}();

bool switched_off(const RunOptions& run, std::string_view name) {
  for (const std::string& off : run.rules_off)
    if (off == name) return true;
  return false;
}

}  // namespace

std::string describe(const RuleCondition& c) {
  std::vector<std::string> parts;
  if (c.dtype != DTypes::any) parts.emplace_back(c.dtype == DTypes::bfloat16 ? "bfloat16" : "float32");
  if (c.batch != Batches::any) parts.emplace_back(c.batch == Batches::one ? "batch 1" : "batch > 1");
  if (c.aggregation == Aggregation::index_add) parts.emplace_back("implementation deepmind");
  if (c.aggregation == Aggregation::scatter_add_into_zeros) parts.emplace_back("implementations physicsnemo, anemoi");
  return parts.empty() ? "always" : fmt::format("{}", fmt::join(parts, ", "));
}

std::span<const RuleCard> rule_cards() { return kCards; }

nlohmann::json to_json(const RuleCard& rule) {
  return {{"name", rule.name},
          {"framework", to_string(rule.framework)},
          {"applies", describe(rule.when)},
          {"effect", rule.effect},
          {"journal", rule.journal}};
}

const RuleCard* find_rule(std::string_view name) {
  for (const RuleCard& card : kCards)
    if (card.name == name) return &card;
  return nullptr;
}

bool rule_applies(const RuleCard& rule, const RunOptions& run, Implementation implementation) {
  const RuleCondition& c = rule.when;
  if (rule.framework != run.framework) return false;
  if (c.dtype == DTypes::bfloat16 && run.dtype != DType::bfloat16) return false;
  if (c.dtype == DTypes::float32 && run.dtype != DType::float32) return false;
  if (c.batch == Batches::one && run.batch != 1) return false;
  if (c.batch == Batches::several && run.batch == 1) return false;
  if (c.aggregation == Aggregation::index_add && implementation != Implementation::deepmind) return false;
  if (c.aggregation == Aggregation::scatter_add_into_zeros && implementation == Implementation::deepmind) return false;
  return true;
}

void check_rule_names(std::span<const std::string> names, const std::string& source, const std::string& field) {
  for (const std::string& name : names) {
    if (find_rule(name)) continue;
    std::vector<std::string> known;
    for (const RuleCard& card : kCards) known.emplace_back(card.name);
    throw InputError(source, field,
                     fmt::format("unknown rule '{}'{}; see 'actmem rules'", name, did_you_mean(name, known)));
  }
}

void apply_memory_rules(MemoryProfile& profile, const RunOptions& run, Implementation implementation) {
  for (const MemoryRule& rule : kRules)
    if (rule_applies(rule.card, run, implementation) && !switched_off(run, rule.card.name)) rule.apply(profile);
}

}  // namespace actmem

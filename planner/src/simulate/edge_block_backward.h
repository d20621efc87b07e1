#pragma once
// The backward pass of an edge update run in blocks, as XLA:TPU compiles and
// orders it under bfloat16 (docs/journal.md J17): the instructions XLA
// makes of each block (read off its HLO for `mid` and GraphCast 0.25° with
// 2, 4 and 8 blocks), ordered by XLA's list scheduler (list_scheduler.h).
//
// The edge update is GraphCast's edge MLP: gather the senders' and
// receivers' features, concatenate them with the edge latent (fused into the
// first matmul, J1), linear, SiLU, linear, LayerNorm. Per block b, in the
// order the backward pass reaches the blocks (the last block first):
// - the output gradient's slice; an optimisation barrier (jax.checkpoint's)
//   over it and the block's inputs, which everything the block recomputes
//   reads through;
// - the two gathers and the edge latent's slice; the first linear's output h
//   (the block the backward reaches last also writes SiLU(h), J2; in
//   DeepMind's program under bfloat16 every block does, J28); the second
//   linear's output with the norm's float32 statistics;
// - the norm's input gradient, which frees the output gradient's slice, then
//   h's gradient;
// - the first weight's gradient: a partial product per block, all read by
//   the Adam update, which computes the last-reached block's product itself
//   (so that block's gathers and slice live until every partial is made);
//   at batch 1 a block's partial waits for the next block's second-linear
//   backward (J30);
// - the second weight's gradient: a chain of products from the last-reached
//   block on, the Adam update computing the first-reached block's;
// - the input gradient, whole (rows × the concatenation's width), split in
//   three: the node parts scattered into the node gradients at once (each a
//   new buffer that replaces the old), the edge part held until every
//   block's is made and then written into the edge latent's gradient.
// The whole output gradient, the edge latent and the node features are freed
// by their last reader unless something after the blocks holds them.
#include <cstdint>
#include <vector>

namespace actmem::detail {

// What each buffer of the blocks' backward holds.
enum class EdgeBlockValue {
  output_gradient,
  senders,
  receivers,
  edges,
  sender_gradient,
  receiver_gradient,
  edge_gradient,
  output_gradient_slice,
  gathered_senders,
  gathered_receivers,
  edge_slice,
  hidden,
  silu,
  pre_norm,
  norm_statistics,
  pre_norm_gradient,
  hidden_gradient,
  first_weight_partial,
  second_weight_partial,
  input_gradient,
  sender_part,
  receiver_part,
  edge_part,
  senders_copy,
  receivers_copy
};
bool is_gradient(EdgeBlockValue value);

// Bytes of what the blocks read and make.
struct EdgeBlockSizes {
  struct Block {
    std::int64_t output_gradient = 0;  // the block's slice of it
    std::int64_t gathered_senders = 0, gathered_receivers = 0, edge_slice = 0;
    std::int64_t hidden = 0, silu = 0, pre_norm = 0, norm_statistics = 0;
    std::int64_t pre_norm_gradient = 0, hidden_gradient = 0;
    std::int64_t input_gradient = 0, sender_part = 0, receiver_part = 0, edge_part = 0;
  };
  std::vector<Block> blocks;  // in forward order
  // Live when the blocks' backward starts; `held`: by something after it.
  std::int64_t output_gradient = 0, senders = 0, receivers = 0, edges = 0;
  bool senders_held = false, receivers_held = false, edges_held = false;
  // Senders and receivers are one tensor (the processor's mesh nodes): one
  // buffer read by both gathers, one gradient both scatter into (the
  // receivers' fields are not read).
  bool receivers_are_senders = false;
  // Every block's recomputation writes SiLU's output beside h, and the
  // second weight gradient reads it (J28); false: only the block the
  // backward reaches last writes it.
  bool every_block_writes_silu = false;
  // The block the backward reaches first, whose second-weight product the
  // Adam update computes, writes h alone and the update reads h (J51).
  bool updated_block_writes_hidden_alone = false;
  // A block's first-weight partial waits for the next block's second-linear
  // backward (J30).
  bool partials_after_next_block = false;
  // Every block's recomputation (through its second linear) runs before
  // any block's norm backward (J47); false: XLA's order interleaves them.
  bool recomputations_first = false;
  // Node features XLA lays out batch-major at batch > 1 and so copies whole,
  // in a block's own time, before each block's gather from them (J15): the
  // bytes of one such copy, in the gathers' dtype; 0 where gathered directly.
  std::int64_t senders_copy = 0, receivers_copy = 0;
  // Whole gradients; an existing one is added to in place.
  std::int64_t sender_gradient = 0, receiver_gradient = 0, edge_gradient = 0;
  bool sender_gradient_exists = false, receiver_gradient_exists = false, edge_gradient_exists = false;
  std::int64_t first_weight_partial = 0, second_weight_partial = 0;
  // The values XLA may recompute next to their readers when the program is
  // over its limit (J7's floor).
  std::vector<EdgeBlockValue> compiler_recomputable;
};

// The instruction that makes or reads it.
enum class EdgeBlockStep {
  inputs,
  slice_output_gradient,
  barrier,
  copy_senders,
  copy_receivers,
  gather_senders,
  gather_receivers,
  slice_edges,
  first_linear,
  second_linear,
  norm_backward,
  second_linear_backward,
  first_weight_gradient,
  first_weight_update,
  second_weight_gradient,
  second_weight_update,
  first_linear_backward,
  split_input_gradient,
  scatter_senders,
  scatter_receivers,
  write_edge_gradient
};

struct EdgeBlockPeak {
  // Bytes in use at the peak less those in use when the backward starts.
  std::int64_t added = 0;
  EdgeBlockStep step = EdgeBlockStep::inputs;
  int block = -1;  // -1: not one block's
  struct Live {
    EdgeBlockValue value;
    int block;  // -1 for the whole tensors
    std::int64_t bytes;
  };
  std::vector<Live> live;  // every buffer live at the peak
};

// The blocks' backward in XLA's order: where its memory peaks, and where it
// peaks less the compiler-recomputable values (what J7's floor reads).
struct EdgeBlockBackward {
  EdgeBlockPeak peak, floor;
};
EdgeBlockBackward edge_block_backward(const EdgeBlockSizes& sizes);

}  // namespace actmem::detail

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <tuple>

#include "simulate/edge_block_backward.h"
#include "simulate/list_scheduler.h"

using namespace actmem::detail;

// The module of integrations/jax/test_jax_reference.py's list scheduler test,
// whose order XLA's rules fix: after p, w (−2 KiB) before a (−4 KiB); a's
// readers u and v tie at −64 B and u, ready first, goes first; u leaves one
// read of a, so v is re-ranked to +4032 B and goes before z (+32 B).
TEST_CASE("list scheduler: most memory freed first, ties to the first ready, re-ranked on a last read") {
  InstructionGraph g;
  const int p_out = g.add_buffer(32);
  const int p = g.add_instruction({p_out}, {});
  const int a_out = g.add_buffer(4096);
  const int a = g.add_instruction({a_out}, {p_out});
  const int w_out = g.add_buffer(2048, true);
  const int w = g.add_instruction({w_out}, {p_out});
  const int u_out = g.add_buffer(64);
  const int u = g.add_instruction({u_out}, {a_out});
  const int v_out = g.add_buffer(64, true);
  const int v = g.add_instruction({v_out}, {a_out});
  const int z_out = g.add_buffer(32, true);
  const int z = g.add_instruction({z_out}, {u_out});
  const std::vector<int> order = g.schedule();
  CHECK(order == std::vector<int>{p, w, a, u, v, z});
  // the peak is at v: w, a, u and v live (p was freed by a, its last
  // reader); a is freed by v
  const std::vector<std::int64_t> usage = g.usage(order);
  CHECK(usage[4] == 2048 + 4096 + 64 + 64);
  CHECK(*std::max_element(usage.begin(), usage.end()) == usage[4]);
  const auto life = g.lifetimes(order);
  CHECK(life[static_cast<std::size_t>(a_out)].begin == 2);
  CHECK(life[static_cast<std::size_t>(a_out)].end == 4);
  CHECK(life[static_cast<std::size_t>(w_out)].end == 5);  // live-out
}

namespace {

// A decoder's edge MLP in bfloat16, latent 512: `edges` mesh-to-grid edges
// in `blocks`, from `mesh` nodes to `grid` nodes.
EdgeBlockSizes decoder(std::int64_t edges, std::int64_t mesh, std::int64_t grid, int blocks) {
  const std::int64_t latent_row = 512 * 2, rows = edges / blocks;
  EdgeBlockSizes s;
  for (int b = 0; b < blocks; ++b) {
    EdgeBlockSizes::Block z;
    z.output_gradient = z.gathered_senders = z.gathered_receivers = z.edge_slice = rows * latent_row;
    z.hidden = z.silu = z.pre_norm = z.pre_norm_gradient = z.hidden_gradient = rows * latent_row;
    z.norm_statistics = rows * 4;
    z.input_gradient = 3 * rows * latent_row;
    z.sender_part = z.receiver_part = z.edge_part = rows * latent_row;
    s.blocks.push_back(z);
  }
  s.output_gradient = s.edges = s.edge_gradient = edges * latent_row;
  s.senders = s.sender_gradient = mesh * latent_row;
  s.receivers = s.receiver_gradient = grid * latent_row;
  s.receiver_gradient_exists = true;
  s.first_weight_partial = 1536 * 512 * 2;
  s.second_weight_partial = 512 * 512 * 2;
  return s;
}

// The blocks' own buffers live at `peak` (value, block), sorted; the
// norms' float32 statistics (a float a row) only where `statistics`.
std::vector<std::pair<EdgeBlockValue, int>> block_values(const EdgeBlockPeak& peak, bool statistics) {
  std::vector<std::pair<EdgeBlockValue, int>> live;
  for (const EdgeBlockPeak::Live& l : peak.live)
    if (l.block >= 0 && (statistics || l.value != EdgeBlockValue::norm_statistics)) live.emplace_back(l.value, l.block);
  std::sort(live.begin(), live.end());
  return live;
}

}  // namespace

// XLA's own figures: the rise of memory over the decoder's blocked backward
// in the program XLA:TPU wrote for `plan-spec deepmind:K` (the usage the
// rematerialisation pass measures at the blocks' peak less that at their
// first output-gradient slice; integrations/jax/remat_trace.py --keep-log,
// docs/journal.md J17), for `mid` (integrations/jax/models/mid.json:
// 120,000 edges, 10,000 mesh and 40,000 grid nodes) and GraphCast 0.25°
// (3,114,720 edges, 40,962 mesh and 1,038,240 grid nodes).
TEST_CASE("edge blocks' backward: XLA's rise of memory over the blocks, for 2, 4 and 8 blocks") {
  const struct {
    std::int64_t edges, mesh, grid;
    int blocks;
    double xla_mib;
    EdgeBlockStep step;
  } cases[] = {{120000, 10000, 40000, 2, 306.1, EdgeBlockStep::norm_backward},
               {120000, 10000, 40000, 4, 362.3, EdgeBlockStep::gather_receivers},
               {120000, 10000, 40000, 8, 454.8, EdgeBlockStep::slice_output_gradient},
               {3114720, 40962, 1038240, 2, 8120.3, EdgeBlockStep::norm_backward},
               {3114720, 40962, 1038240, 4, 9615.9, EdgeBlockStep::gather_receivers},
               {3114720, 40962, 1038240, 8, 11804.7, EdgeBlockStep::slice_output_gradient}};
  for (const auto& c : cases) {
    CAPTURE(c.edges);
    CAPTURE(c.blocks);
    const EdgeBlockSizes s = decoder(c.edges, c.mesh, c.grid, c.blocks);
    const EdgeBlockPeak peak = edge_block_backward(s).peak;
    // the blocks start with their first slice made
    const double rise_mib = static_cast<double>(peak.added - s.blocks.front().output_gradient) / (1 << 20);
    CHECK(std::abs(rise_mib - c.xla_mib) < 0.03 * c.xla_mib);
    CHECK(peak.step == c.step);
    CHECK(peak.block == 0);
  }
}

// At batch 2 XLA:TPU lays the grid nodes' features out batch-major and
// copies them whole before each block's gather from them (docs/cost-model.md
// J15): graphcast-small's decoder (97,740 edges, 10,242 mesh and 32,580 grid
// nodes, rows × 2) in 8 blocks, DeepMind's plan. XLA's order, read off its
// module (`remat_trace.py --model graphcast-small --plan-spec deepmind
// --batch 2`, #2280–#2425), makes every block's output-gradient slice, the
// senders' gather and edge slice of all blocks but the two reached last
// (`copy.1796` … `copy.1781`, `slice.239` … `slice.224`), and no receivers'
// gather before the last slice (`split.1`), which is the blocks' peak.
TEST_CASE("edge blocks' backward: at batch 2 the grid's gathers wait for their block, the mesh's are hoisted") {
  EdgeBlockSizes s = decoder(97740 * 2, 10242 * 2, 32580 * 2, 8);
  s.receivers_copy = s.receivers;
  const EdgeBlockPeak peak = edge_block_backward(s).peak;
  CHECK(peak.step == EdgeBlockStep::slice_output_gradient);
  auto count = [&](EdgeBlockValue value) {
    return std::count_if(peak.live.begin(), peak.live.end(),
                         [&](const EdgeBlockPeak::Live& l) { return l.value == value; });
  };
  CHECK(count(EdgeBlockValue::output_gradient_slice) == 8);
  CHECK(count(EdgeBlockValue::gathered_senders) == 6);
  CHECK(count(EdgeBlockValue::edge_slice) == 6);
  CHECK(count(EdgeBlockValue::gathered_receivers) == 0);
  CHECK(count(EdgeBlockValue::receivers_copy) == 0);
  // without the copies both gathers are hoisted (J17, batch 1)
  s.receivers_copy = 0;
  const EdgeBlockPeak hoisted = edge_block_backward(s).peak;
  CHECK(std::count_if(hoisted.live.begin(), hoisted.live.end(),
                      [](const EdgeBlockPeak::Live& l) { return l.value == EdgeBlockValue::gathered_receivers; }) > 0);
}

// Under float32 at batch 2 the grid nodes' features are float32 but the copy
// each block gathers from is bfloat16, the gathers' dtype (docs/cost-model.md
// J15, J13): `mid`'s decoder (120,000 edges, 10,000 mesh and 40,000 grid
// nodes, rows × 2) in 4 blocks, `deepmind:4`, each step checkpointed, rollout
// 2. XLA's loop body (`remat_trace.py --model integrations/jax/models/mid.json
// --plan-spec deepmind:4 --rollout 2 --step-checkpoint --batch 2 --dtype
// float32`, #785–#838) recomputes two whole blocks up to h before it takes the
// last two output-gradient slices: `split.587`, `copy.645`, `slice.1312`,
// `copy.643` (the grid side's gather, from `copy.642 = bf16[40000,2,512]`),
// `fusion.2354` (h, `f32[30000,2,512]`), `split.586`, … `fusion.2349`,
// `split.585`, `split.584`: the peak.
TEST_CASE("edge blocks' backward: under float32 at batch 2 the grid's copy is bfloat16 and two blocks run ahead") {
  const std::int64_t edges = 120000 * 2, mesh = 10000 * 2, grid = 40000 * 2, rows = edges / 4;
  const std::int64_t f32 = 512 * 4, bf16 = 512 * 2;
  EdgeBlockSizes s;
  for (int b = 0; b < 4; ++b) {
    EdgeBlockSizes::Block z;
    z.output_gradient = z.hidden = z.silu = z.pre_norm = rows * f32;
    z.gathered_senders = z.gathered_receivers = z.edge_slice = rows * bf16;
    z.pre_norm_gradient = z.hidden_gradient = rows * bf16;  // J21
    z.norm_statistics = rows * 4;
    z.input_gradient = 3 * rows * f32;
    z.sender_part = z.receiver_part = z.edge_part = rows * f32;
    s.blocks.push_back(z);
  }
  s.output_gradient = edges * f32;
  s.edges = edges * bf16;
  s.edge_gradient = edges * f32;
  s.senders = s.sender_gradient = mesh * f32;
  s.receivers = s.receiver_gradient = grid * f32;
  s.receiver_gradient_exists = true;
  s.first_weight_partial = 1536 * 512 * 4;
  s.second_weight_partial = 512 * 512 * 4;
  s.receivers_copy = grid * bf16;
  const EdgeBlockPeak peak = edge_block_backward(s).peak;
  auto count = [](const EdgeBlockPeak& p, EdgeBlockValue value) {
    return std::count_if(p.live.begin(), p.live.end(), [&](const EdgeBlockPeak::Live& l) { return l.value == value; });
  };
  CHECK(peak.step == EdgeBlockStep::slice_output_gradient);
  CHECK(peak.block == 0);
  CHECK(count(peak, EdgeBlockValue::output_gradient_slice) == 4);
  CHECK(count(peak, EdgeBlockValue::hidden) == 2);
  CHECK(count(peak, EdgeBlockValue::gathered_receivers) == 2);
  CHECK(count(peak, EdgeBlockValue::gathered_senders) == 2);
  CHECK(count(peak, EdgeBlockValue::edge_slice) == 2);
  // With a float32 copy (the nodes' own size) no block's grid-side gather or
  // h is made before the last slice: 0.34 GiB under XLA's peak.
  s.receivers_copy = s.receivers;
  const EdgeBlockPeak float32_copy = edge_block_backward(s).peak;
  CHECK(count(float32_copy, EdgeBlockValue::hidden) == 0);
  CHECK(count(float32_copy, EdgeBlockValue::gathered_receivers) == 0);
  CHECK(peak.added - float32_copy.added == 2 * rows * (f32 + bf16));
}

// DeepMind's program at batch 1 ([N, 1, C]; docs/journal.md J28, J30):
// `mid`'s decoder in 2 blocks, `plan-spec deepmind:2`, rollout 1. At the
// peak of XLA's program (`remat_trace.py --model
// integrations/jax/models/mid.json --plan-spec deepmind:2 --min-mib 50`,
// #982 fusion.1308, 58.59 MiB a block's buffer) both blocks' gathers and
// edge slices are live (gather_custom_fusion.17–20, slice.58, slice.61):
// the block reached first frees them only after the other block's
// second-linear backward (J30). That block's SiLU output is live, h gone
// (fusion.460), the second weight gradient reading it: every block's
// recomputation writes the pair (J28). Beside them the other block's
// output-gradient slice (split.2), h and SiLU (fusion.461, a pair), the
// norm's input (convert_reduce_fusion.8) and its gradient (fusion.1308), and
// gradients of the block reached first (fusion.1310, fusion.1349).
TEST_CASE("edge blocks' backward: at batch 1 every block writes SiLU and keeps its gathers to the next's backward") {
  using V = EdgeBlockValue;
  auto live_at_peak = [](bool every_block_writes_silu, bool partials_after_next_block) {
    EdgeBlockSizes s = decoder(120000, 10000, 40000, 2);
    s.every_block_writes_silu = every_block_writes_silu;
    s.partials_after_next_block = partials_after_next_block;
    const EdgeBlockPeak peak = edge_block_backward(s).peak;
    return std::pair{peak.step, block_values(peak, true)};
  };
  // Block 0 is the one the backward reaches last, block 1 the first.
  std::vector<std::pair<V, int>> xla{{V::hidden, 0},
                                     {V::output_gradient_slice, 0},
                                     {V::pre_norm, 0},
                                     {V::norm_statistics, 0},
                                     {V::hidden_gradient, 1}};
  for (V both : {V::gathered_senders, V::gathered_receivers, V::edge_slice, V::silu, V::pre_norm_gradient})
    for (int block : {0, 1}) xla.emplace_back(both, block);
  std::sort(xla.begin(), xla.end());
  const auto [step, live] = live_at_peak(true, true);
  CHECK(step == EdgeBlockStep::norm_backward);
  CHECK(live == xla);
  // Either rule alone gives another peak (and the schedules are kept, in
  // one process, by every field of the sizes).
  CHECK(live_at_peak(true, false).second != xla);
  CHECK(live_at_peak(false, true).second != xla);
  CHECK(live_at_peak(true, true).second == xla);
}

// In a scanned rollout's loop body at batch 2 the block the backward reaches
// first writes h alone (docs/journal.md J51): graphcast-small's decoder
// (195,480 edges, 10,242 mesh and 65,160 grid nodes, rows × 2) in 2 blocks,
// `deepmind:2`, each step checkpointed, rollout 4 (`remat_trace.py --model
// graphcast-small --plan-spec deepmind:2 --rollout 4 --step-checkpoint
// --batch 2`, 19 s). XLA's loop body runs that block's recomputation and
// backward first (`fusion.6136`, h alone, #1725; its first-weight partial
// `fusion.6143` frees its gathers and edge slice, #1745), then the other
// block's (`fusion.6129`, the pair, #1747), and peaks at that one's norm
// backward (#1764 `fusion.6134`) holding 11 block buffers of 190.91 MiB:
// the second block's gathers (`copy.4288`, `copy.4289`), edge slice
// (`slice.1691`), h and SiLU, norm input (`convert_reduce_fusion.360`) and
// its gradient, output-gradient slice (`split.1556`), and of the first
// block h (read by the Adam update, which computes its second-weight
// product), the norm's input gradient (`fusion.6141`), h's gradient
// (`fusion.6142`) and the first-weight partial (`fusion.6143`, 1.5 MiB).
TEST_CASE("edge blocks' backward: in a loop body at batch 2 the block reached first writes h alone (J51)") {
  using V = EdgeBlockValue;
  auto live_at_peak = [](bool updated_block_writes_hidden_alone) {
    EdgeBlockSizes s = decoder(195480 * 2, 10242 * 2, 65160 * 2, 2);
    s.receivers_copy = s.receivers;
    s.every_block_writes_silu = true;
    s.updated_block_writes_hidden_alone = updated_block_writes_hidden_alone;
    const EdgeBlockPeak peak = edge_block_backward(s).peak;
    return std::tuple{peak.step, peak.block, block_values(peak, false)};
  };
  // Block 0 is the one the backward reaches last, block 1 the first.
  std::vector<std::pair<V, int>> xla{
      {V::hidden, 1}, {V::pre_norm_gradient, 1}, {V::hidden_gradient, 1}, {V::first_weight_partial, 1}};
  for (V value : {V::gathered_senders, V::gathered_receivers, V::edge_slice, V::hidden, V::silu, V::pre_norm,
                  V::pre_norm_gradient, V::output_gradient_slice})
    xla.emplace_back(value, 0);
  std::sort(xla.begin(), xla.end());
  const auto [step, block, live] = live_at_peak(true);
  CHECK(step == EdgeBlockStep::norm_backward);
  CHECK(block == 0);
  CHECK(live == xla);
  // With J28 alone the block reached first keeps SiLU to the update, and
  // the blocks peak at that block's own norm backward.
  const auto [step28, block28, live28] = live_at_peak(false);
  CHECK(block28 == 1);
  CHECK(std::count(live28.begin(), live28.end(), std::pair{V::silu, 1}) == 1);
}

// In a step-checkpointed loop body whose step inputs are in host memory,
// XLA recomputes every block of an edge update, outside the step's inner
// checkpoints or inside one, before any block's backward (docs/cost-model.md
// J47): `mid`'s decoder in 4 blocks at rollout 2 (`remat_trace.py --model
// integrations/jax/models/mid.json --plan plans/offloaded-blocks/
// mid-r2-bfloat16-b1.json --rollout 2`), body #648–#810: the 4
// output-gradient splits, the 4 edge slices, both gathers of every block, h
// and SiLU(h) of every block (one of them h alone there: J28 gives every
// block the pair), the 4 norms' inputs, and the first norm's input gradient
// (`fusion.2208`), where the body peaks.
TEST_CASE("edge blocks' backward: an offloaded loop body recomputes every block before their backward (J47)") {
  using V = EdgeBlockValue;
  EdgeBlockSizes s = decoder(120000, 10000, 40000, 4);
  s.every_block_writes_silu = true;
  s.partials_after_next_block = true;
  auto block_values_at_peak = [&](bool recomputations_first) {
    s.recomputations_first = recomputations_first;
    const EdgeBlockPeak peak = edge_block_backward(s).peak;
    return std::pair{peak.step, block_values(peak, false)};
  };
  std::vector<std::pair<V, int>> xla;
  for (V each : {V::output_gradient_slice, V::gathered_senders, V::gathered_receivers, V::edge_slice, V::hidden,
                 V::silu, V::pre_norm})
    for (int block = 0; block < 4; ++block) xla.emplace_back(each, block);
  const auto [step, live] = block_values_at_peak(true);
  CHECK(step == EdgeBlockStep::norm_backward);
  REQUIRE(live.size() == xla.size() + 1);  // and the first norm backward's output
  std::vector<std::pair<V, int>> made;
  for (const auto& l : live)
    if (l.first == V::pre_norm_gradient)
      made.push_back(l);
    else
      CHECK(std::binary_search(xla.begin(), xla.end(), l));
  CHECK(made.size() == 1);
  // J17's interleaved order holds far fewer blocks' recomputations.
  CHECK(block_values_at_peak(false).second.size() < xla.size() - 4);
}

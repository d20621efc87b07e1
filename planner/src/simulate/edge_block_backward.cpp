#include "simulate/edge_block_backward.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "simulate/list_scheduler.h"

namespace actmem::detail {

bool is_gradient(EdgeBlockValue value) {
  switch (value) {
    case EdgeBlockValue::output_gradient:
    case EdgeBlockValue::sender_gradient:
    case EdgeBlockValue::receiver_gradient:
    case EdgeBlockValue::edge_gradient:
    case EdgeBlockValue::output_gradient_slice:
    case EdgeBlockValue::pre_norm_gradient:
    case EdgeBlockValue::hidden_gradient:
    case EdgeBlockValue::first_weight_partial:
    case EdgeBlockValue::second_weight_partial:
    case EdgeBlockValue::input_gradient:
    case EdgeBlockValue::sender_part:
    case EdgeBlockValue::receiver_part:
    case EdgeBlockValue::edge_part: return true;
    default: return false;
  }
}

namespace {

// The instruction graph with what each buffer and instruction is.
class BlockGraph {
 public:
  int buffer(std::int64_t bytes, EdgeBlockValue value, int block, bool live_out = false) {
    values_.push_back({value, block, bytes});
    return graph_.add_buffer(bytes, live_out);
  }
  int instruction(EdgeBlockStep step, int block, std::vector<int> defines, std::vector<int> reads,
                  std::vector<int> after = {}, std::vector<int> reads_via_alias = {}) {
    steps_.push_back({step, block});
    return graph_.add_instruction(std::move(defines), std::move(reads), std::move(after), std::move(reads_via_alias));
  }

  void mark_live_out(int buffer) { graph_.mark_live_out(buffer); }

  EdgeBlockBackward schedule(const std::vector<EdgeBlockValue>& recomputable) const {
    const std::vector<int> order = graph_.schedule();
    const std::vector<InstructionGraph::Lifetime> life = graph_.lifetimes(order);
    std::vector<char> kept(values_.size(), 1);
    for (std::size_t b = 0; b < values_.size(); ++b)
      kept[b] = std::find(recomputable.begin(), recomputable.end(), values_[b].value) == recomputable.end();
    const std::vector<std::int64_t> usage = graph_.usage(order), floor = graph_.usage(order, kept);
    auto at = [&](const std::vector<std::int64_t>& curve) {
      const auto p = static_cast<std::size_t>(std::max_element(curve.begin(), curve.end()) - curve.begin());
      EdgeBlockPeak peak;
      peak.added = usage[p] - usage.front();  // the first instruction defines the inputs
      peak.step = steps_[static_cast<std::size_t>(order[p])].first;
      peak.block = steps_[static_cast<std::size_t>(order[p])].second;
      for (std::size_t b = 0; b < values_.size(); ++b)
        if (life[b].begin <= p && p <= life[b].end) peak.live.push_back(values_[b]);
      return peak;
    };
    return {at(usage), at(floor)};
  }

 private:
  InstructionGraph graph_;
  std::vector<EdgeBlockPeak::Live> values_;
  std::vector<std::pair<EdgeBlockStep, int>> steps_;
};

}  // namespace

EdgeBlockBackward schedule_edge_blocks(const EdgeBlockSizes& s) {
  using V = EdgeBlockValue;
  using S = EdgeBlockStep;
  BlockGraph g;
  const int whole = -1;
  // What the backward starts from, made by the instructions before it (so
  // that XLA's re-ranking sees their readers as users of one operand).
  const int output_gradient = g.buffer(s.output_gradient, V::output_gradient, whole);
  const int senders = g.buffer(s.senders, V::senders, whole, s.senders_held);
  const int receivers =
      s.receivers_are_senders ? senders : g.buffer(s.receivers, V::receivers, whole, s.receivers_held);
  const int edges = g.buffer(s.edges, V::edges, whole, s.edges_held);
  std::vector<int> inputs{output_gradient, senders, edges};
  if (!s.receivers_are_senders) inputs.push_back(receivers);
  int sender_gradient = -1, own_receiver_gradient = -1, edge_gradient = -1;
  int& receiver_gradient = s.receivers_are_senders ? sender_gradient : own_receiver_gradient;
  if (s.sender_gradient_exists)
    inputs.push_back(sender_gradient = g.buffer(s.sender_gradient, V::sender_gradient, whole));
  if (s.receiver_gradient_exists && !s.receivers_are_senders)
    inputs.push_back(receiver_gradient = g.buffer(s.receiver_gradient, V::receiver_gradient, whole));
  if (s.edge_gradient_exists)
    inputs.push_back(edge_gradient = g.buffer(s.edge_gradient, V::edge_gradient, whole, true));
  g.instruction(S::inputs, whole, inputs, {});

  struct Made {
    int gathered_senders, gathered_receivers, edge_slice, hidden, silu, pre_norm_gradient, hidden_gradient;
    int pre_norm, statistics, slice, barrier;
    int second_linear, second_linear_backward;  // the instructions
  };
  const int blocks = static_cast<int>(s.blocks.size());
  std::vector<Made> made(s.blocks.size());
  // Block b's norm backward (after `after` too) and second-linear backward.
  auto differentiate_norm_and_second_linear = [&](int b, const std::vector<int>& after) {
    const EdgeBlockSizes::Block& z = s.blocks[static_cast<std::size_t>(b)];
    Made& m = made[static_cast<std::size_t>(b)];
    std::vector<int> norm_after{m.barrier};
    norm_after.insert(norm_after.end(), after.begin(), after.end());
    m.pre_norm_gradient = g.buffer(z.pre_norm_gradient, V::pre_norm_gradient, b);
    g.instruction(S::norm_backward, b, {m.pre_norm_gradient}, {m.pre_norm, m.statistics}, norm_after, {m.slice});
    m.hidden_gradient = g.buffer(z.hidden_gradient, V::hidden_gradient, b);
    m.second_linear_backward =
        g.instruction(S::second_linear_backward, b, {m.hidden_gradient}, {m.pre_norm_gradient, m.hidden});
  };
  for (int b = blocks - 1; b >= 0; --b) {
    const EdgeBlockSizes::Block& z = s.blocks[static_cast<std::size_t>(b)];
    Made& m = made[static_cast<std::size_t>(b)];
    const int slice = g.buffer(z.output_gradient, V::output_gradient_slice, b);
    g.instruction(S::slice_output_gradient, b, {slice}, {output_gradient});
    const int barrier = g.instruction(S::barrier, b, {}, {slice, senders, receivers, edges});
    // A gather reads its nodes through the barrier, or a copy of them made
    // from there, which the gather frees.
    auto gather = [&](EdgeBlockStep step, EdgeBlockValue value, std::int64_t bytes, std::int64_t copy_bytes,
                      EdgeBlockStep copy_step, EdgeBlockValue copy_value, int nodes) {
      const int gathered = g.buffer(bytes, value, b);
      if (copy_bytes == 0) {
        g.instruction(step, b, {gathered}, {}, {barrier}, {nodes});
        return gathered;
      }
      const int copy = g.buffer(copy_bytes, copy_value, b);
      g.instruction(copy_step, b, {copy}, {}, {barrier}, {nodes});
      g.instruction(step, b, {gathered}, {copy});
      return gathered;
    };
    m.gathered_senders = gather(S::gather_senders, V::gathered_senders, z.gathered_senders, s.senders_copy,
                                S::copy_senders, V::senders_copy, senders);
    m.gathered_receivers = gather(S::gather_receivers, V::gathered_receivers, z.gathered_receivers, s.receivers_copy,
                                  S::copy_receivers, V::receivers_copy, receivers);
    m.edge_slice = g.buffer(z.edge_slice, V::edge_slice, b);
    g.instruction(S::slice_edges, b, {m.edge_slice}, {}, {barrier}, {edges});
    m.hidden = g.buffer(z.hidden, V::hidden, b);
    std::vector<int> first_linear{m.hidden};
    m.silu = m.hidden;
    const bool updated_block = blocks > 1 && b == blocks - 1;
    if ((b == 0 || s.every_block_writes_silu) && !(updated_block && s.updated_block_writes_hidden_alone))
      first_linear.push_back(m.silu = g.buffer(z.silu, V::silu, b));
    g.instruction(S::first_linear, b, first_linear, {m.gathered_senders, m.gathered_receivers, m.edge_slice});
    m.pre_norm = g.buffer(z.pre_norm, V::pre_norm, b);
    m.statistics = g.buffer(z.norm_statistics, V::norm_statistics, b);
    m.second_linear = g.instruction(S::second_linear, b, {m.pre_norm, m.statistics}, {m.silu});
    m.slice = slice;
    m.barrier = barrier;
    if (!s.recomputations_first) differentiate_norm_and_second_linear(b, {});
  }
  if (s.recomputations_first) {
    std::vector<int> recomputed;
    for (const Made& m : made) recomputed.push_back(m.second_linear);
    for (int b = blocks - 1; b >= 0; --b) differentiate_norm_and_second_linear(b, recomputed);
  }
  auto first_weight_inputs = [&](const Made& m) {
    return std::vector<int>{m.hidden_gradient, m.gathered_senders, m.gathered_receivers, m.edge_slice};
  };
  std::vector<int> update = first_weight_inputs(made.front());
  for (int b = 1; b < blocks; ++b) {
    const int partial = g.buffer(s.first_weight_partial, V::first_weight_partial, b);
    std::vector<int> after;
    if (s.partials_after_next_block) after.push_back(made[static_cast<std::size_t>(b - 1)].second_linear_backward);
    g.instruction(S::first_weight_gradient, b, {partial}, first_weight_inputs(made[static_cast<std::size_t>(b)]),
                  after);
    update.push_back(partial);
  }
  g.instruction(S::first_weight_update, 0, {}, update);
  if (blocks > 1) {
    int chain = g.buffer(s.second_weight_partial, V::second_weight_partial, 0);
    g.instruction(S::second_weight_gradient, 0, {chain}, {made.front().silu, made.front().pre_norm_gradient});
    for (int b = 1; b + 1 < blocks; ++b) {
      const Made& m = made[static_cast<std::size_t>(b)];
      const int next = g.buffer(s.second_weight_partial, V::second_weight_partial, b);
      g.instruction(S::second_weight_gradient, b, {next}, {chain, m.silu, m.pre_norm_gradient});
      chain = next;
    }
    const Made& last = made.back();
    g.instruction(S::second_weight_update, blocks - 1, {}, {chain, last.silu, last.pre_norm_gradient});
  } else {
    g.instruction(S::second_weight_update, 0, {}, {made.front().silu, made.front().pre_norm_gradient});
  }
  std::vector<int> edge_parts;
  if (edge_gradient >= 0) edge_parts.push_back(edge_gradient);
  for (int b = blocks - 1; b >= 0; --b) {
    const EdgeBlockSizes::Block& z = s.blocks[static_cast<std::size_t>(b)];
    const int input_gradient = g.buffer(z.input_gradient, V::input_gradient, b);
    g.instruction(S::first_linear_backward, b, {input_gradient}, {made[static_cast<std::size_t>(b)].hidden_gradient});
    auto part = [&](std::int64_t bytes, EdgeBlockValue value) {
      const int p = g.buffer(bytes, value, b);
      g.instruction(S::split_input_gradient, b, {p}, {input_gradient});
      return p;
    };
    // Each scatter writes a new buffer that replaces the gradient so far.
    auto scatter = [&](EdgeBlockStep step, int source, int& gradient, std::int64_t bytes, EdgeBlockValue value) {
      const int next = g.buffer(bytes, value, b);
      std::vector<int> reads{source};
      if (gradient >= 0) reads.push_back(gradient);
      g.instruction(step, b, {next}, reads);
      gradient = next;
    };
    const int sender_part = part(z.sender_part, V::sender_part);
    scatter(S::scatter_senders, sender_part, sender_gradient, s.sender_gradient, V::sender_gradient);
    const int receiver_part = part(z.receiver_part, V::receiver_part);
    edge_parts.push_back(part(z.edge_part, V::edge_part));
    if (s.receivers_are_senders)
      scatter(S::scatter_receivers, receiver_part, receiver_gradient, s.sender_gradient, V::sender_gradient);
    else
      scatter(S::scatter_receivers, receiver_part, receiver_gradient, s.receiver_gradient, V::receiver_gradient);
  }
  // The edge parts meet in the edge latent's gradient: a new one, or added
  // in place to the one there is.
  std::vector<int> written;
  if (edge_gradient < 0) written.push_back(g.buffer(s.edge_gradient, V::edge_gradient, whole, true));
  g.instruction(S::write_edge_gradient, whole, written, edge_parts);
  g.mark_live_out(sender_gradient);
  if (!s.receivers_are_senders) g.mark_live_out(receiver_gradient);
  return g.schedule(s.compiler_recomputable);
}

}  // namespace actmem::detail

namespace actmem::detail {

namespace {

// The sizes as one key: runs of equal blocks, then the rest (every field
// of EdgeBlockSizes: a schedule is kept by it).
std::vector<std::int64_t> key_of(const EdgeBlockSizes& s) {
  std::vector<std::int64_t> key;
  auto fields = [](const EdgeBlockSizes::Block& b) {
    return std::vector<std::int64_t>{
        b.output_gradient, b.gathered_senders, b.gathered_receivers, b.edge_slice,      b.hidden,         b.silu,
        b.pre_norm,        b.norm_statistics,  b.pre_norm_gradient,  b.hidden_gradient, b.input_gradient, b.sender_part,
        b.receiver_part,   b.edge_part};
  };
  for (std::size_t b = 0; b < s.blocks.size();) {
    const std::vector<std::int64_t> f = fields(s.blocks[b]);
    std::size_t end = b + 1;
    while (end < s.blocks.size() && fields(s.blocks[end]) == f) ++end;
    key.push_back(static_cast<std::int64_t>(end - b));
    key.insert(key.end(), f.begin(), f.end());
    b = end;
  }
  key.push_back(-1);
  key.insert(key.end(), {s.output_gradient, s.senders, s.receivers, s.edges, s.senders_held, s.receivers_held,
                         s.edges_held, s.receivers_are_senders, s.senders_copy, s.receivers_copy, s.sender_gradient,
                         s.receiver_gradient, s.edge_gradient, s.sender_gradient_exists, s.receiver_gradient_exists,
                         s.edge_gradient_exists, s.first_weight_partial, s.second_weight_partial});
  key.insert(key.end(), {s.every_block_writes_silu, s.updated_block_writes_hidden_alone, s.partials_after_next_block,
                         s.recomputations_first});
  for (EdgeBlockValue v : s.compiler_recomputable) key.push_back(static_cast<std::int64_t>(v));
  return key;
}

}  // namespace

// The solver replays a stage's blocks in many contexts that give them the
// same sizes, and a schedule of hundreds of blocks takes milliseconds:
// schedules are kept, per process, by their sizes.
EdgeBlockBackward edge_block_backward(const EdgeBlockSizes& sizes) {
  static std::mutex mutex;
  static std::map<std::vector<std::int64_t>, EdgeBlockBackward> kept;
  constexpr std::size_t kMaxKept = 1024;
  const std::vector<std::int64_t> key = key_of(sizes);
  {
    const std::lock_guard lock(mutex);
    if (const auto it = kept.find(key); it != kept.end()) return it->second;
  }
  EdgeBlockBackward scheduled = schedule_edge_blocks(sizes);
  const std::lock_guard lock(mutex);
  if (kept.size() >= kMaxKept) kept.clear();
  kept.emplace(key, scheduled);
  return scheduled;
}

}  // namespace actmem::detail

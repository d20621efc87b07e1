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

// XLA's instructions for the backward of an edge update's blocks, built
// from their sizes: the values the blocks start from, each block's
// recomputation (last block first), the norm's and second linear's
// backward, the weight gradients summed over the blocks, then the input
// gradients scattered block by block.
class EdgeBlockProgram {
 public:
  explicit EdgeBlockProgram(const EdgeBlockSizes& s) : s_(s), made_(s.blocks.size()) {
    add_starting_values();
    const int blocks = block_count();
    for (int b = blocks - 1; b >= 0; --b) {
      recompute_block(b);
      if (!s_.recomputations_first) differentiate_norm_and_second_linear(b, {});
    }
    if (s_.recomputations_first) {
      std::vector<int> recomputed;
      for (const Made& m : made_) recomputed.push_back(m.second_linear);
      for (int b = blocks - 1; b >= 0; --b) differentiate_norm_and_second_linear(b, recomputed);
    }
    add_first_weight_gradient();
    add_second_weight_gradient();
    add_input_gradients();
  }

  EdgeBlockBackward schedule() const { return g_.schedule(s_.compiler_recomputable); }

 private:
  static constexpr int kWhole = -1;  // the block of a value or instruction of no one block
  struct Made {
    int gathered_senders, gathered_receivers, edge_slice, hidden, silu, pre_norm_gradient, hidden_gradient;
    int pre_norm, statistics, slice, barrier;
    int second_linear, second_linear_backward;  // the instructions
  };

  int block_count() const { return static_cast<int>(s_.blocks.size()); }
  const EdgeBlockSizes::Block& sizes(int b) const { return s_.blocks[static_cast<std::size_t>(b)]; }
  Made& made(int b) { return made_[static_cast<std::size_t>(b)]; }
  int& receiver_gradient() { return s_.receivers_are_senders ? sender_gradient_ : own_receiver_gradient_; }

  // What the backward starts from, made by the instructions before it (so
  // that XLA's re-ranking sees their readers as users of one operand).
  void add_starting_values() {
    using V = EdgeBlockValue;
    output_gradient_ = g_.buffer(s_.output_gradient, V::output_gradient, kWhole);
    senders_ = g_.buffer(s_.senders, V::senders, kWhole, s_.senders_held);
    receivers_ = s_.receivers_are_senders ? senders_ : g_.buffer(s_.receivers, V::receivers, kWhole, s_.receivers_held);
    edges_ = g_.buffer(s_.edges, V::edges, kWhole, s_.edges_held);
    std::vector<int> inputs{output_gradient_, senders_, edges_};
    if (!s_.receivers_are_senders) inputs.push_back(receivers_);
    if (s_.sender_gradient_exists)
      inputs.push_back(sender_gradient_ = g_.buffer(s_.sender_gradient, V::sender_gradient, kWhole));
    if (s_.receiver_gradient_exists && !s_.receivers_are_senders)
      inputs.push_back(own_receiver_gradient_ = g_.buffer(s_.receiver_gradient, V::receiver_gradient, kWhole));
    if (s_.edge_gradient_exists)
      inputs.push_back(edge_gradient_ = g_.buffer(s_.edge_gradient, V::edge_gradient, kWhole, true));
    g_.instruction(EdgeBlockStep::inputs, kWhole, inputs, {});
  }

  // A gather of block b reads its nodes through the barrier, or a copy of
  // them made from there, which the gather frees.
  int gather(int b, EdgeBlockStep step, EdgeBlockValue value, std::int64_t bytes, std::int64_t copy_bytes,
             EdgeBlockStep copy_step, EdgeBlockValue copy_value, int nodes) {
    const int barrier = made(b).barrier;
    const int gathered = g_.buffer(bytes, value, b);
    if (copy_bytes == 0) {
      g_.instruction(step, b, {gathered}, {}, {barrier}, {nodes});
      return gathered;
    }
    const int copy = g_.buffer(copy_bytes, copy_value, b);
    g_.instruction(copy_step, b, {copy}, {}, {barrier}, {nodes});
    g_.instruction(step, b, {gathered}, {copy});
    return gathered;
  }

  // Block b's slice of the output gradient and its forward, recomputed.
  void recompute_block(int b) {
    using V = EdgeBlockValue;
    using S = EdgeBlockStep;
    const EdgeBlockSizes::Block& z = sizes(b);
    Made& m = made(b);
    m.slice = g_.buffer(z.output_gradient, V::output_gradient_slice, b);
    g_.instruction(S::slice_output_gradient, b, {m.slice}, {output_gradient_});
    m.barrier = g_.instruction(S::barrier, b, {}, {m.slice, senders_, receivers_, edges_});
    m.gathered_senders = gather(b, S::gather_senders, V::gathered_senders, z.gathered_senders, s_.senders_copy,
                                S::copy_senders, V::senders_copy, senders_);
    m.gathered_receivers = gather(b, S::gather_receivers, V::gathered_receivers, z.gathered_receivers,
                                  s_.receivers_copy, S::copy_receivers, V::receivers_copy, receivers_);
    m.edge_slice = g_.buffer(z.edge_slice, V::edge_slice, b);
    g_.instruction(S::slice_edges, b, {m.edge_slice}, {}, {m.barrier}, {edges_});
    m.hidden = g_.buffer(z.hidden, V::hidden, b);
    std::vector<int> first_linear{m.hidden};
    m.silu = m.hidden;
    const bool updated_block = block_count() > 1 && b == block_count() - 1;
    if ((b == 0 || s_.every_block_writes_silu) && !(updated_block && s_.updated_block_writes_hidden_alone))
      first_linear.push_back(m.silu = g_.buffer(z.silu, V::silu, b));
    g_.instruction(S::first_linear, b, first_linear, {m.gathered_senders, m.gathered_receivers, m.edge_slice});
    m.pre_norm = g_.buffer(z.pre_norm, V::pre_norm, b);
    m.statistics = g_.buffer(z.norm_statistics, V::norm_statistics, b);
    m.second_linear = g_.instruction(S::second_linear, b, {m.pre_norm, m.statistics}, {m.silu});
  }

  // Block b's norm backward (after `after` too) and second-linear backward.
  void differentiate_norm_and_second_linear(int b, const std::vector<int>& after) {
    const EdgeBlockSizes::Block& z = sizes(b);
    Made& m = made(b);
    std::vector<int> norm_after{m.barrier};
    norm_after.insert(norm_after.end(), after.begin(), after.end());
    m.pre_norm_gradient = g_.buffer(z.pre_norm_gradient, EdgeBlockValue::pre_norm_gradient, b);
    g_.instruction(EdgeBlockStep::norm_backward, b, {m.pre_norm_gradient}, {m.pre_norm, m.statistics}, norm_after,
                   {m.slice});
    m.hidden_gradient = g_.buffer(z.hidden_gradient, EdgeBlockValue::hidden_gradient, b);
    m.second_linear_backward =
        g_.instruction(EdgeBlockStep::second_linear_backward, b, {m.hidden_gradient}, {m.pre_norm_gradient, m.hidden});
  }

  // The first linear's weight gradient: block 0's computed in the update,
  // every other block's as a partial that the update sums.
  void add_first_weight_gradient() {
    auto inputs = [](const Made& m) {
      return std::vector<int>{m.hidden_gradient, m.gathered_senders, m.gathered_receivers, m.edge_slice};
    };
    std::vector<int> update = inputs(made(0));
    for (int b = 1; b < block_count(); ++b) {
      const int partial = g_.buffer(s_.first_weight_partial, EdgeBlockValue::first_weight_partial, b);
      std::vector<int> after;
      if (s_.partials_after_next_block) after.push_back(made(b - 1).second_linear_backward);
      g_.instruction(EdgeBlockStep::first_weight_gradient, b, {partial}, inputs(made(b)), after);
      update.push_back(partial);
    }
    g_.instruction(EdgeBlockStep::first_weight_update, 0, {}, update);
  }

  // The second linear's: a chain of partials from block 0 to the last.
  void add_second_weight_gradient() {
    using S = EdgeBlockStep;
    if (block_count() == 1) {
      g_.instruction(S::second_weight_update, 0, {}, {made(0).silu, made(0).pre_norm_gradient});
      return;
    }
    int chain = g_.buffer(s_.second_weight_partial, EdgeBlockValue::second_weight_partial, 0);
    g_.instruction(S::second_weight_gradient, 0, {chain}, {made(0).silu, made(0).pre_norm_gradient});
    for (int b = 1; b + 1 < block_count(); ++b) {
      const int next = g_.buffer(s_.second_weight_partial, EdgeBlockValue::second_weight_partial, b);
      g_.instruction(S::second_weight_gradient, b, {next}, {chain, made(b).silu, made(b).pre_norm_gradient});
      chain = next;
    }
    const Made& last = made_.back();
    g_.instruction(S::second_weight_update, block_count() - 1, {}, {chain, last.silu, last.pre_norm_gradient});
  }

  // Each scatter of block b writes a new buffer that replaces the gradient so far.
  void scatter(int b, EdgeBlockStep step, int source, int& gradient, std::int64_t bytes, EdgeBlockValue value) {
    const int next = g_.buffer(bytes, value, b);
    std::vector<int> reads{source};
    if (gradient >= 0) reads.push_back(gradient);
    g_.instruction(step, b, {next}, reads);
    gradient = next;
  }

  // The input gradients, last block first: split into the senders', the
  // receivers' and the edges' parts; the nodes' scattered, the edge parts
  // met in the edge latent's gradient (a new one, or added in place to the
  // one there is).
  void add_input_gradients() {
    using V = EdgeBlockValue;
    using S = EdgeBlockStep;
    std::vector<int> edge_parts;
    if (edge_gradient_ >= 0) edge_parts.push_back(edge_gradient_);
    for (int b = block_count() - 1; b >= 0; --b) {
      const EdgeBlockSizes::Block& z = sizes(b);
      const int input_gradient = g_.buffer(z.input_gradient, V::input_gradient, b);
      g_.instruction(S::first_linear_backward, b, {input_gradient}, {made(b).hidden_gradient});
      auto part = [&](std::int64_t bytes, EdgeBlockValue value) {
        const int p = g_.buffer(bytes, value, b);
        g_.instruction(S::split_input_gradient, b, {p}, {input_gradient});
        return p;
      };
      const int sender_part = part(z.sender_part, V::sender_part);
      scatter(b, S::scatter_senders, sender_part, sender_gradient_, s_.sender_gradient, V::sender_gradient);
      const int receiver_part = part(z.receiver_part, V::receiver_part);
      edge_parts.push_back(part(z.edge_part, V::edge_part));
      if (s_.receivers_are_senders)
        scatter(b, S::scatter_receivers, receiver_part, receiver_gradient(), s_.sender_gradient, V::sender_gradient);
      else
        scatter(b, S::scatter_receivers, receiver_part, receiver_gradient(), s_.receiver_gradient,
                V::receiver_gradient);
    }
    std::vector<int> written;
    if (edge_gradient_ < 0) written.push_back(g_.buffer(s_.edge_gradient, V::edge_gradient, kWhole, true));
    g_.instruction(S::write_edge_gradient, kWhole, written, edge_parts);
    g_.mark_live_out(sender_gradient_);
    if (!s_.receivers_are_senders) g_.mark_live_out(own_receiver_gradient_);
  }

  const EdgeBlockSizes& s_;
  BlockGraph g_;
  std::vector<Made> made_;
  int output_gradient_ = -1, senders_ = -1, receivers_ = -1, edges_ = -1;
  int sender_gradient_ = -1, own_receiver_gradient_ = -1, edge_gradient_ = -1;
};

}  // namespace

EdgeBlockBackward schedule_edge_blocks(const EdgeBlockSizes& s) { return EdgeBlockProgram(s).schedule(); }

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

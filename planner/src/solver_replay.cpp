#include "solver_replay.h"

#include <algorithm>
#include <stdexcept>

namespace actmem::detail {

ReplayGraph::ReplayGraph(const CostGraph& g)
    : graph(g),
      profile(memory_profile(g.run().framework, g.run().dtype)),
      stage_count(static_cast<int>(g.stages().size())) {
  const auto ops = g.ops();
  op_key.resize(ops.size());
  for (std::size_t i = 0; i < ops.size(); ++i) op_key[i] = key(ops[i].step, ops[i].stage);
  const std::size_t n = g.tensors().size();
  producer_key.assign(n, -1);
  last_use_key.assign(n, -1);
  has_grad.assign(n, 0);
  for (std::size_t t = 0; t < n; ++t) {
    const OpId p = g.producer(static_cast<TensorId>(t));
    if (p >= 0) producer_key[t] = op_key[static_cast<std::size_t>(p)];
    for (OpId c : g.consumers(static_cast<TensorId>(t)))
      last_use_key[t] = std::max(last_use_key[t], op_key[static_cast<std::size_t>(c)]);
  }
  // Which tensors receive a gradient: backward runs an op when one of its
  // outputs has one (the losses are seeded), and it gives one to every input
  // that requires it.
  for (std::size_t i = ops.size(); i-- > 0;) {
    const Op& op = ops[i];
    bool any = op.kind == OpKind::mse_loss;
    for (TensorId t : op.outputs) any = any || has_grad[static_cast<std::size_t>(t)];
    if (!any) continue;
    for (TensorId t : op.inputs)
      if (g.tensor(t).requires_grad && g.tensor(t).role == TensorRole::activation) has_grad[static_cast<std::size_t>(t)] = 1;
  }
  local_key.assign(n, -1);
  {
    std::vector<int> first_of_step;
    for (std::size_t i = 0; i < ops.size(); ++i)
      if (first_of_step.size() <= static_cast<std::size_t>(ops[i].step)) first_of_step.push_back(static_cast<int>(i));
    for (std::size_t i = 0; i < ops.size(); ++i)
      for (std::size_t k = 0; k < ops[i].outputs.size(); ++k)
        local_key[static_cast<std::size_t>(ops[i].outputs[k])] =
            (static_cast<int>(i) - first_of_step[static_cast<std::size_t>(ops[i].step)]) * 8 + static_cast<int>(k);
  }
  const int steps = static_cast<int>(g.run().rollout);
  incoming.assign(static_cast<std::size_t>(steps), std::vector<std::vector<TensorId>>(static_cast<std::size_t>(stage_count + 1)));
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const int self = op_key[i];
    auto& list = incoming[static_cast<std::size_t>(op.step)][static_cast<std::size_t>(op.stage)];
    auto add = [&](TensorId t) {
      if (!has_grad[static_cast<std::size_t>(t)] || last_use_key[static_cast<std::size_t>(t)] <= self) return;
      if (std::find(list.begin(), list.end(), t) == list.end()) list.push_back(t);
    };
    for (TensorId t : op.outputs) add(t);
    for (TensorId t : op.inputs)
      if (g.tensor(t).role == TensorRole::activation && producer_key[static_cast<std::size_t>(t)] != self) add(t);
  }
  for (auto& step : incoming)
    for (auto& list : step) std::sort(list.begin(), list.end());
}

namespace {

// A copy of the simulator's buffer machinery (simulator.cpp), restricted to
// the items of one stage. Comments there explain each rule; here only what
// differs: buffers made before the stage start live, and holders outside
// the stage are one extra reference that never goes away.
class Replay {
 public:
  Replay(const ReplayGraph& rg, int step, int stage, const StageContext& ctx)
      : rg_(rg),
        g_(rg.graph),
        profile_(rg.profile),
        step_(step),
        stage_(stage),
        ctx_(ctx),
        current_(g_.tensors().size(), -1),
        grad_(g_.tensors().size(), -1),
        uses_(g_.tensors().size(), 0),
        produced_in_(g_.tensors().size(), -1),
        block_internal_(g_.tensors().size(), 0),
        block_output_(g_.tensors().size(), 0),
        param_grad_done_(g_.tensors().size(), ctx.first_parameter_gradients ? 0 : 1) {}

  StageRun run(const std::vector<Item>& items) {
    StageRun result;
    std::vector<OpId> ops;
    collect_ops(items, ops);
    const int self = rg_.key(step_, stage_);
    const int lo = ctx_.original_forward ? -1 : rg_.key(step_, ctx_.context_lo);
    const int hi = ctx_.original_forward ? 1 << 30 : rg_.key(step_, ctx_.context_hi);
    const int held = ctx_.held_before < 0 ? -1 : rg_.key(step_, ctx_.held_before);

    // The context: ops of this stage are made here; so are inputs made by
    // earlier stages inside the context's range. Inputs made elsewhere are
    // live buffers at the start.
    context_ = 1;
    std::vector<TensorId> externals;
    for (OpId id : ops)
      for (TensorId t : g_.op(id).inputs) {
        if (g_.tensor(t).role != TensorRole::activation) continue;
        if (rg_.producer_key[static_cast<std::size_t>(t)] == self) continue;
        if (std::find(externals.begin(), externals.end(), t) != externals.end()) continue;
        externals.push_back(t);
      }
    for (TensorId t : externals)
      if (rg_.producer_key[static_cast<std::size_t>(t)] >= lo) produced_in_[static_cast<std::size_t>(t)] = context_;
    mark_produced(items);
    count_uses(items, 1);
    for (TensorId t : externals) {
      const int pk = rg_.producer_key[static_cast<std::size_t>(t)];
      int refs = 1;  // made before the context: held by the checkpoint that keeps it
      if (made_here(t)) {
        refs = uses_[static_cast<std::size_t>(t)];
        if (consumed_after(t, self, hi) || pk < held) ++refs;
      }
      current(t) = allocate(g_.tensor(t).bytes(), refs);
    }
    // Outputs used later in the context: one reference for those users.
    // Held outputs of a nested region's recomputation: one more, let go
    // when the nested region ends.
    std::vector<TensorId> held_outputs;
    for (OpId id : ops)
      for (TensorId t : g_.op(id).outputs) {
        if (consumed_after(t, self, hi)) ++uses_[static_cast<std::size_t>(t)];
        if (ctx_.hold_outputs && consumed_after(t, hi, 1 << 30)) {
          ++uses_[static_cast<std::size_t>(t)];
          held_outputs.push_back(t);
        }
      }

    const std::int64_t start = live_;
    peak_ = live_;
    forward(items, ctx_.saving);
    result.forward = {peak_ - start, live_ - start};
    if (!ctx_.saving) return result;

    // Backward: gradients flowing in from later stages; for the loss, its
    // seed (the held loss goes when all seeds exist).
    const std::int64_t prelude = live_;
    for (OpId id : ops) {
      const Op& op = g_.op(id);
      if (op.kind == OpKind::mse_loss) grad(op.outputs.front()) = allocate(4, 1);
    }
    for (int b : losses_) release(b);
    result.backward_prelude_bytes = live_ - prelude;
    for (TensorId t : rg_.incoming[static_cast<std::size_t>(step_)][static_cast<std::size_t>(stage_)]) {
      std::int64_t bytes = g_.tensor(t).bytes();
      for (const auto& [u, b] : ctx_.incoming_grads)
        if (u == t) bytes = b;
      grad(t) = allocate(bytes, 1);
    }
    const std::int64_t bstart = live_;
    peak_ = live_;
    region_depth_ = ctx_.in_region ? 1 : 0;
    backward(items, 0);
    result.backward = {peak_ - bstart, live_ - bstart};
    const std::int64_t before = live_;
    for (TensorId t : held_outputs)
      if (current(t) >= 0) release(current(t));
    result.released_at_end_bytes = before - live_;
    for (TensorId t : externals)
      if (grad(t) >= 0) result.outgoing_grads.emplace_back(t, buffer(grad(t)).bytes);
    return result;
  }

 private:
  struct Buffer {
    std::int64_t bytes = 0;
    int refs = 0;
  };

  bool consumed_after(TensorId t, int self, int hi) const {
    for (OpId c : g_.consumers(t)) {
      const int k = rg_.op_key[static_cast<std::size_t>(c)];
      if (k > self && k <= hi) return true;
    }
    return false;
  }

  void collect_ops(const std::vector<Item>& items, std::vector<OpId>& ops) const {
    for (const Item& item : items) {
      if (item.kind == Item::Kind::op)
        ops.push_back(item.op);
      else
        collect_ops(item.children, ops);
    }
  }

  int allocate(std::int64_t bytes, int refs) {
    int id;
    if (!free_slots_.empty()) {
      id = free_slots_.back();
      free_slots_.pop_back();
    } else {
      id = static_cast<int>(buffers_.size());
      buffers_.emplace_back();
    }
    buffers_[static_cast<std::size_t>(id)] = {bytes, refs};
    live_ += bytes;
    return id;
  }
  Buffer& buffer(int id) { return buffers_[static_cast<std::size_t>(id)]; }
  void release(int id) {
    Buffer& b = buffer(id);
    if (--b.refs > 0) return;
    if (b.refs < 0) throw std::logic_error("solver replay: buffer released twice");
    live_ -= b.bytes;
    free_slots_.push_back(id);
  }
  void retain(int id) { ++buffer(id).refs; }
  void sample() { peak_ = std::max(peak_, live_); }

  int& current(TensorId t) { return current_[static_cast<std::size_t>(t)]; }
  int& grad(TensorId t) { return grad_[static_cast<std::size_t>(t)]; }
  const Tensor& tensor(TensorId t) const { return g_.tensor(t); }
  std::int64_t bytes_of(TensorId t, std::int64_t block_rows) const {
    const Tensor& x = tensor(t);
    const bool per_block = block_internal_[static_cast<std::size_t>(t)] || block_output_[static_cast<std::size_t>(t)];
    return block_rows > 0 && per_block ? block_rows * x.cols * x.element_bytes : x.bytes();
  }

  void mark_produced(const std::vector<Item>& items) {
    for (const Item& item : items) {
      if (item.kind == Item::Kind::op) {
        for (TensorId t : g_.op(item.op).outputs) {
          produced_in_[static_cast<std::size_t>(t)] = context_;
          uses_[static_cast<std::size_t>(t)] = 0;
        }
      } else {
        mark_produced(item.children);
      }
    }
  }
  void count_uses(const std::vector<Item>& items, std::int64_t repeat) {
    for (const Item& item : items) {
      if (item.kind == Item::Kind::op) {
        for (TensorId t : g_.op(item.op).inputs) {
          if (produced_in_[static_cast<std::size_t>(t)] != context_) continue;
          uses_[static_cast<std::size_t>(t)] +=
              static_cast<int>(block_internal_[static_cast<std::size_t>(t)] ? 1 : repeat);
        }
      } else if (item.kind == Item::Kind::blocks) {
        for (TensorId t : item.internal) block_internal_[static_cast<std::size_t>(t)] = 1;
        block_output_[static_cast<std::size_t>(item.output)] = 1;
        count_uses(item.children, repeat * static_cast<std::int64_t>(item.block_rows.size()));
      } else {
        count_uses(item.children, repeat);
      }
    }
  }
  bool made_here(TensorId t) const { return produced_in_[static_cast<std::size_t>(t)] == context_; }

  void begin_context(const std::vector<Item>& items) {
    context_ = ++context_count_;
    mark_produced(items);
    count_uses(items, 1);
  }

  // ---- forward ----
  void forward(const std::vector<Item>& items, bool saving, std::int64_t block_rows = 0) {
    for (const Item& item : items) {
      switch (item.kind) {
        case Item::Kind::op: forward_op(item.op, saving, block_rows); break;
        case Item::Kind::region: throw std::logic_error("solver replay: a stage holds no regions");
        case Item::Kind::blocks: forward_blocks(item, saving); break;
      }
    }
  }

  // At the saving level only: `blocks` blocks' references to the item's
  // inputs (equal blocks keep the same buffers).
  void keep_inputs(const Item& item, std::int64_t blocks) {
    Kept kept{{}, blocks};
    for (TensorId t : item.external_inputs) {
      const int b = current(t);
      if (b < 0) continue;
      buffer(b).refs += static_cast<int>(blocks);
      kept.buffers.push_back(b);
    }
    kept_inputs_.push_back(std::move(kept));
  }

  // `blocks` blocks' kept inputs let go, innermost first; by skipped blocks
  // (`skipped`) they are never the last references.
  void release_kept(std::int64_t blocks, bool skipped) {
    while (blocks > 0) {
      Kept& k = kept_inputs_.back();
      const std::int64_t n = std::min(blocks, k.blocks);
      for (int b : k.buffers) {
        if (skipped) {
          drop_references(b, n);
        } else {
          for (std::int64_t i = 0; i < n; ++i) release(b);
        }
      }
      k.blocks -= n;
      blocks -= n;
      if (k.blocks == 0) kept_inputs_.pop_back();
    }
  }

  void forward_op(OpId id, bool saving, std::int64_t block_rows) {
    const Op& op = g_.op(id);
    const OpMemoryRule& rule = profile_.rule(op.kind);
    for (TensorId t : op.outputs) {
      const bool block_output = collecting_block_output_ && !block_internal_[static_cast<std::size_t>(t)];
      const int refs = block_output ? 1 : uses_[static_cast<std::size_t>(t)];
      current(t) = rule.output_materialized ? allocate(output_bytes(op, rule, t, block_rows), refs + 1) : -1;
    }
    sample();
    if (saving) {
      std::vector<int> saved;
      for (std::size_t i = 0; i < op.inputs.size(); ++i)
        if (rule.saved_inputs & (1u << i)) save(op.inputs[i], saved);
      for (std::size_t i = 0; i < op.outputs.size(); ++i)
        if (rule.saved_outputs & (1u << i)) save(op.outputs[i], saved);
      saved_.push_back(std::move(saved));
    }
    for (TensorId t : op.inputs) {
      if (!made_here(t) || current(t) < 0) continue;
      if (!block_internal_[static_cast<std::size_t>(t)]) --uses_[static_cast<std::size_t>(t)];
      release(current(t));
    }
    if (op.kind == OpKind::mse_loss && current(op.outputs.front()) >= 0) {
      retain(current(op.outputs.front()));
      losses_.push_back(current(op.outputs.front()));
    }
    for (TensorId t : op.outputs)
      if (current(t) >= 0) release(current(t));
  }

  std::int64_t output_bytes(const Op& op, const OpMemoryRule& rule, TensorId t, std::int64_t block_rows) const {
    return rule.output_sized_like_input >= 0 && t == op.outputs.front()
               ? bytes_of(op.inputs[static_cast<std::size_t>(rule.output_sized_like_input)], block_rows)
               : bytes_of(t, block_rows);
  }

  void save(TensorId t, std::vector<int>& saved) {
    const int b = current(t);
    if (b < 0 || tensor(t).role != TensorRole::activation) return;
    retain(b);
    saved.push_back(b);
  }

  // Blocks of equal rows run alike, which spares replaying most of them
  // (the simulator runs every block; tests check the two agree):
  // - Forward: a block adds its output chunk, held for the concat, and
  //   uses its inputs once more; inputs are freed at their last use, in the
  //   last block. So a block followed by a block of the same rows that is
  //   not the last peaks lower than that one, and only its lasting effect is
  //   applied (skip_forward_blocks).
  // - Backward (last block first): the first block creates the gradient
  //   accumulators and the parameter gradients, the last may free the kept
  //   inputs, and every block between leaves memory as it found it. So of
  //   the middle blocks of equal rows the first is replayed and the others
  //   only release their kept inputs.
  void forward_blocks(const Item& item, bool saving) {
    std::vector<int> outputs;
    const std::vector<std::int64_t>& rows = item.block_rows;
    auto skippable = [&](std::size_t b) { return b + 2 < rows.size() && rows[b + 1] == rows[b]; };
    for (std::size_t b = 0; b < rows.size();) {
      if (skippable(b)) {
        std::size_t end = b;  // blocks b..end-1, all of rows[b]
        while (skippable(end)) ++end;
        if (saving) keep_inputs(item, static_cast<std::int64_t>(end - b));
        outputs.push_back(skip_forward_blocks(item, rows[b], static_cast<std::int64_t>(end - b)));
        b = end;
        continue;
      }
      if (saving) keep_inputs(item, 1);
      collecting_block_output_ = true;
      forward(item.children, false, rows[b]);
      collecting_block_output_ = false;
      outputs.push_back(current(item.output));
      ++b;
    }
    const Tensor& out = tensor(item.output);
    current(item.output) = allocate(out.bytes(), uses_[static_cast<std::size_t>(item.output)] + 1);
    sample();
    for (int b : outputs) release(b);
    release(current(item.output));
  }

  // What `count` blocks' ops leave behind, without running them: their
  // output chunks (as one buffer), and `count` uses of each input made in
  // this context (never the last: that is in the last block).
  int skip_forward_blocks(const Item& item, std::int64_t block_rows, std::int64_t count) {
    int chunks = -1;
    for (const Item& child : item.children) {
      const Op& op = g_.op(child.op);
      for (TensorId t : op.inputs) {
        if (!made_here(t) || current(t) < 0 || block_internal_[static_cast<std::size_t>(t)]) continue;
        uses_[static_cast<std::size_t>(t)] -= static_cast<int>(count);
        drop_references(current(t), count);
      }
      if (std::find(op.outputs.begin(), op.outputs.end(), item.output) != op.outputs.end()) {
        const OpMemoryRule& rule = profile_.rule(op.kind);
        if (rule.output_materialized) chunks = allocate(count * output_bytes(op, rule, item.output, block_rows), 1);
      }
    }
    current(item.output) = chunks;
    return chunks;
  }

  // References let go by skipped blocks, which never free the buffer.
  void drop_references(int id, std::int64_t count) {
    Buffer& b = buffer(id);
    if (b.refs <= count) throw std::logic_error("solver replay: a skipped edge block would free a buffer");
    b.refs -= static_cast<int>(count);
  }

  // ---- backward ----
  void backward(const std::vector<Item>& items, std::int64_t block_rows) {
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      const Item& item = *it;
      switch (item.kind) {
        case Item::Kind::op: backward_op(item.op, block_rows); break;
        case Item::Kind::region: throw std::logic_error("solver replay: a stage holds no regions");
        case Item::Kind::blocks: backward_blocks(item); break;
      }
    }
  }

  // simulator.cpp backward_region() for one block.
  void backward_block(const Item& item, std::int64_t block_rows) {
    const int saved_context = context_;
    begin_context(item.children);
    const bool hold = region_depth_ > 0 && profile_.nested_recompute_keeps_outputs;
    if (hold)
      for (TensorId t : item.outputs)
        if (made_here(t)) ++uses_[static_cast<std::size_t>(t)];
    forward(item.children, true, block_rows);
    std::vector<int> held;
    if (hold)
      for (TensorId t : item.outputs)
        if (made_here(t) && current(t) >= 0) held.push_back(current(t));
    context_ = saved_context;
    ++region_depth_;
    backward(item.children, block_rows);
    --region_depth_;
    for (int b : held) release(b);
    release_kept(1, /*skipped=*/false);
  }

  void backward_blocks(const Item& item) {
    const int g = grad(item.output);
    grad(item.output) = -1;
    const std::vector<std::int64_t>& rows = item.block_rows;
    // Block b + 1 was a middle block of the same rows: b runs alike.
    auto skippable = [&](std::size_t b) { return b > 0 && b + 2 < rows.size() && rows[b + 1] == rows[b]; };
    for (std::size_t b = rows.size(); b-- > 0;) {
      if (skippable(b)) {
        std::size_t first = b;  // blocks first..b
        while (skippable(first - 1)) --first;
        release_kept(static_cast<std::int64_t>(b - first + 1), /*skipped=*/true);
        b = first;
        continue;
      }
      if (g >= 0) retain(g);
      grad(item.output) = g;
      backward_block(item, rows[b]);
      if (grad(item.output) >= 0) release(grad(item.output));
      grad(item.output) = -1;
    }
    if (g >= 0) release(g);
  }

  void backward_op(OpId id, std::int64_t block_rows) {
    const Op& op = g_.op(id);
    const OpMemoryRule& rule = profile_.rule(op.kind);
    std::vector<int> saved = std::move(saved_.back());
    saved_.pop_back();
    bool any_grad = false;
    for (TensorId t : op.outputs) any_grad = any_grad || grad(t) >= 0;
    if (any_grad) {
      std::int64_t transient = 0;
      struct Contribution {
        TensorId tensor;
        int buffer;
        bool sliced;
      };
      std::vector<Contribution> contributions;
      for (std::size_t i = 0; i < op.inputs.size(); ++i) {
        const TensorId t = op.inputs[i];
        const Tensor& x = tensor(t);
        if (!x.requires_grad) continue;
        if (x.role == TensorRole::parameter) {
          if (!param_grad_done_[static_cast<std::size_t>(t)]) {
            param_grad_done_[static_cast<std::size_t>(t)] = 1;
            allocate(x.bytes(), 1);
          } else {
            transient += x.bytes() * (profile_.accumulate_out_of_place ? 2 : 1);
          }
          continue;
        }
        // A slice of the output's gradient is a view of it (PyTorch), or,
        // where slices are copies (XLA), a buffer of its own unless the
        // input was fused into this op and never materialised.
        const bool alias = rule.grads_alias_output &&
                           (!rule.grads_are_slices || profile_.slices_are_views || current_made_fused(t));
        // A block's slice of a whole tensor (the edge latent it reads).
        const bool sliced = block_rows > 0 && rule.grads_are_slices && !block_internal_[static_cast<std::size_t>(t)];
        int c;
        if (alias) {
          c = grad(op.outputs.front());
          if (c < 0) continue;
          retain(c);
        } else {
          c = allocate(sliced ? block_rows * x.cols * x.element_bytes : bytes_of(t, block_rows), 1);
        }
        contributions.push_back({t, c, sliced});
      }
      if (rule.backward_scratch_copies > 0)
        transient += rule.backward_scratch_copies * bytes_of(op.inputs.front(), block_rows);
      live_ += transient;
      sample();
      live_ -= transient;
      for (const Contribution& c : contributions) accumulate(c.tensor, c.buffer, c.sliced);
    }
    for (TensorId t : op.outputs) {
      if (grad(t) >= 0) release(grad(t));
      grad(t) = -1;
    }
    for (int b : saved) release(b);
  }

  // True when t's producer is fused into its consumer (no buffer of its own).
  bool current_made_fused(TensorId t) const {
    const OpId p = g_.producer(t);
    return p >= 0 && !profile_.rule(g_.op(p).kind).output_materialized;
  }

  void accumulate(TensorId t, int c, bool sliced) {
    // A block's slice of a whole tensor: its backward pads the gradient to
    // the full tensor (a fresh buffer), unless XLA adds it in place into an
    // existing gradient.
    if (sliced && !profile_.accumulate_out_of_place && grad(t) >= 0) {
      release(c);
      return;
    }
    if (sliced) {
      const int full = allocate(tensor(t).bytes(), 1);
      sample();
      release(c);
      c = full;
    }
    int& b = grad(t);
    if (b < 0) {
      b = c;
      return;
    }
    if (!profile_.accumulate_out_of_place) {
      release(c);
      return;
    }
    const int sum = allocate(tensor(t).bytes(), 1);
    sample();
    release(b);
    release(c);
    b = sum;
  }

  const ReplayGraph& rg_;
  const CostGraph& g_;
  const MemoryProfile& profile_;
  int step_, stage_;
  StageContext ctx_;
  std::vector<Buffer> buffers_;
  std::vector<int> free_slots_;
  std::vector<int> current_, grad_, uses_, produced_in_;
  std::vector<char> block_internal_, block_output_, param_grad_done_;
  std::vector<std::vector<int>> saved_;
  struct Kept {
    std::vector<int> buffers;
    std::int64_t blocks = 1;  // references per buffer, one per block
  };
  std::vector<Kept> kept_inputs_;
  std::vector<int> losses_;
  int region_depth_ = 0;
  int context_ = 1;
  int context_count_ = 1;
  bool collecting_block_output_ = false;
  std::int64_t live_ = 0;
  std::int64_t peak_ = 0;
};

}  // namespace

StageRun replay_stage(const ReplayGraph& rg, const std::vector<Item>& items, int step, int stage,
                      const StageContext& ctx) {
  return Replay(rg, step, stage, ctx).run(items);
}

}  // namespace actmem::detail

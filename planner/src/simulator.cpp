#include "actmem/simulator.h"

#include <algorithm>
#include <stdexcept>

#include "schedule.h"

namespace actmem {
namespace {

enum Category { kActivations, kGradients, kWorkspace, kCategories };

// One allocation. `refs` counts its holders: forward consumers still to run
// in the context that made it, ops that saved it, regions that keep it,
// gradient buffers that alias it. It is freed when refs reaches 0.
struct Buffer {
  std::int64_t bytes = 0;
  int refs = 0;
  Category category = kActivations;
  TensorId tensor = -1;  // what it holds, for diagnostics (-1: a gradient or scratch)
};

class Simulation {
 public:
  Simulation(const CostGraph& graph, const Device& device, const Plan& plan, const SimulationOptions& options)
      : g_(graph),
        device_(device),
        profile_(memory_profile(graph.run().framework, graph.run().dtype)),
        schedule_(build_schedule(graph, plan)),
        options_(options),
        current_(graph.tensors().size(), -1),
        grad_(graph.tensors().size(), -1),
        uses_(graph.tensors().size(), 0),
        produced_in_(graph.tensors().size(), -1),
        block_internal_(graph.tensors().size(), 0),
        block_output_(graph.tensors().size(), 0),
        param_grad_done_(graph.tensors().size(), 0) {
    const double peak = graph.run().dtype == DType::bfloat16 && device.peak_bf16_flops > 0 ? device.peak_bf16_flops
                                                                                          : device.peak_fp32_flops;
    flops_per_s_ = peak;
    static_.parameters = graph.parameter_bytes();
    static_.optimizer_state = graph.run().optimizer == Optimizer::adam ? 2 * graph.parameter_bytes() : 0;
    static_.inputs = graph.input_bytes();
    static_.reserved = device.reserve_bytes;
    static_.workspace = profile_.parameter_cast_bytes * graph.parameter_count();
  }

  Report run(std::int64_t budget_bytes) {
    Report r;
    r.budget_bytes = budget_bytes;

    begin_context(schedule_.items);
    forward(schedule_.items, /*saving=*/true);
    r.activation_bytes_after_forward = live_[kActivations];

    // Backward starts from d(loss)/d(loss) = 1 for every rollout step's loss.
    for (const Op& op : g_.ops())
      if (op.kind == OpKind::mse_loss) grad(op.outputs.front()) = allocate(4, kGradients, 1);
    for (int b : losses_) release(b);
    backward(schedule_.items);
    phase_peak_dynamic_ = peak_dynamic_;

    // Optimizer step: parameter gradients are all resident; updates in place.
    sample(Pass::optimizer, -1, -1, "optimizer");
    time_s_ += static_cast<double>(g_.parameter_bytes()) * (g_.run().optimizer == Optimizer::adam ? 7.0 : 3.0) /
               device_.bandwidth_bytes_per_s;

    r.peak_dynamic_bytes = phase_peak_dynamic_;
    r.breakdown = peak_breakdown_;
    r.peak_bytes = peak_breakdown_.total();
    r.peak_at = peak_at_;
    r.fits = r.peak_bytes <= budget_bytes;
    r.forward_flops = forward_flops_;
    r.backward_flops = backward_flops_;
    r.recompute_flops = recompute_flops_;
    r.step_time_s = time_s_;
    r.timeline = std::move(timeline_);
    return r;
  }

 private:
  // ---- buffers -------------------------------------------------------------
  int allocate(std::int64_t bytes, Category category, int refs, TensorId tensor = -1) {
    int id;
    if (!free_slots_.empty()) {
      id = free_slots_.back();
      free_slots_.pop_back();
    } else {
      id = static_cast<int>(buffers_.size());
      buffers_.emplace_back();
    }
    buffers_[static_cast<std::size_t>(id)] = {bytes, refs, category, tensor};
    live_[category] += bytes;
    return id;
  }
  Buffer& buffer(int id) { return buffers_[static_cast<std::size_t>(id)]; }
  void release(int id) {
    Buffer& b = buffer(id);
    if (--b.refs > 0) return;
    if (b.refs < 0)
      throw std::logic_error("simulator: buffer released twice" +
                             (b.tensor >= 0 ? " (" + tensor(b.tensor).name + ")" : std::string{}));
    live_[b.category] -= b.bytes;
    free_slots_.push_back(id);
  }
  void retain(int id) { ++buffer(id).refs; }

  int& current(TensorId t) { return current_[static_cast<std::size_t>(t)]; }
  int& grad(TensorId t) { return grad_[static_cast<std::size_t>(t)]; }
  const Tensor& tensor(TensorId t) const { return g_.tensor(t); }

  // Bytes of a tensor in this execution: inside a block, the tensors the
  // block makes (its output included) have the block's rows.
  std::int64_t bytes_of(TensorId t, std::int64_t block_rows) const {
    const Tensor& x = tensor(t);
    const bool per_block = block_internal_[static_cast<std::size_t>(t)] || block_output_[static_cast<std::size_t>(t)];
    return block_rows > 0 && per_block ? block_rows * x.cols * x.element_bytes : x.bytes();
  }

  // ---- contexts ------------------------------------------------------------
  // A context is one forward execution of a list of items: the whole step,
  // or the recomputation of one region or block. uses_ counts, for tensors
  // made in the context, the consumers in it still to run; for
  // block-internal tensors it is the (constant) count per block instance.
  void begin_context(const std::vector<Item>& items) {
    context_ = ++context_count_;
    mark_produced(items);
    count_uses(items, 1);
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
          // Block-internal tensors are counted per block instance.
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

  // ---- forward -------------------------------------------------------------
  // `saving`: ops keep what the framework keeps for backward (false inside a
  // checkpoint region during the forward pass).
  void forward(const std::vector<Item>& items, bool saving, std::int64_t block_rows = 0, int block = -1,
               Pass pass = Pass::forward) {
    for (const Item& item : items) {
      switch (item.kind) {
        case Item::Kind::op: forward_op(item.op, saving, block_rows, block, pass); break;
        case Item::Kind::region:
          keep_inputs(saving, item.external_inputs);
          forward(item.children, false, block_rows, block, pass);
          break;
        case Item::Kind::blocks: forward_blocks(item, saving, pass); break;
      }
    }
  }

  // A checkpoint keeps its inputs until its backward, from the execution at
  // the saving level: the forward pass for top-level regions, the parent's
  // recomputation for nested ones (whose forward-pass inputs the parent's
  // checkpoint drops).
  void keep_inputs(bool saving, const std::vector<TensorId>& inputs) {
    if (!saving) return;
    std::vector<int> kept;
    for (TensorId t : inputs) {
      const int b = current(t);
      if (b < 0) continue;
      retain(b);
      kept.push_back(b);
    }
    kept_inputs_.push_back(std::move(kept));
  }

  void forward_op(OpId id, bool saving, std::int64_t block_rows, int block, Pass pass) {
    const Op& op = g_.op(id);
    const OpMemoryRule& rule = profile_.rule(op.kind);
    const double scale = block_rows > 0 ? static_cast<double>(block_rows) / static_cast<double>(edge_rows_of(op)) : 1.0;
    account_forward(op, scale, pass);
    for (TensorId t : op.outputs) {
      // In a block, the edge update's output is held for the concat of blocks.
      const bool block_output = collecting_block_output_ && !block_internal_[static_cast<std::size_t>(t)];
      const int refs = block_output ? 1 : uses_[static_cast<std::size_t>(t)];
      const std::int64_t bytes = rule.output_sized_like_input >= 0 && t == op.outputs.front()
                                     ? bytes_of(op.inputs[static_cast<std::size_t>(rule.output_sized_like_input)], block_rows)
                                     : bytes_of(t, block_rows);
      current(t) = rule.output_materialized ? allocate(bytes, kActivations, refs + 1, t) : -1;
    }
    sample(pass, op.step, block, op.name, op.stage);
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
    // The caller holds each loss until the backward pass starts from it.
    if (op.kind == OpKind::mse_loss && current(op.outputs.front()) >= 0) {
      retain(current(op.outputs.front()));
      losses_.push_back(current(op.outputs.front()));
    }
    // The +1 taken at allocation: outputs nobody holds die now.
    for (TensorId t : op.outputs)
      if (current(t) >= 0) release(current(t));
  }

  void save(TensorId t, std::vector<int>& saved) {
    const int b = current(t);
    if (b < 0 || tensor(t).role != TensorRole::activation) return;
    retain(b);
    saved.push_back(b);
  }

  std::int64_t edge_rows_of(const Op& op) const {
    return tensor(op.outputs.front()).rows;  // edge-update ops: rows of their (edge-shaped) output
  }

  // B blocks, each a checkpoint over the edge update, then the concat.
  void forward_blocks(const Item& item, bool saving, Pass pass) {
    std::vector<int> outputs;
    for (std::size_t b = 0; b < item.block_rows.size(); ++b) {
      keep_inputs(saving, item.external_inputs);
      collecting_block_output_ = true;
      forward(item.children, false, item.block_rows[b], static_cast<int>(b), pass);
      collecting_block_output_ = false;
      outputs.push_back(current(item.output));  // held (one reference) until the concat
    }
    const Tensor& out = tensor(item.output);
    current(item.output) = allocate(out.bytes(), kActivations, uses_[static_cast<std::size_t>(item.output)] + 1);
    sample(pass, step_of(item), -1, item.name + ".concat_blocks", stage_of(item));
    for (int b : outputs) release(b);
    release(current(item.output));
  }

  int step_of(const Item& item) const { return g_.op(item.first_op).step; }
  int stage_of(const Item& item) const { return g_.op(item.first_op).stage; }

  // ---- backward ------------------------------------------------------------
  void backward(const std::vector<Item>& items, std::int64_t block_rows = 0, int block = -1) {
    for (auto it = items.rbegin(); it != items.rend(); ++it) {
      const Item& item = *it;
      switch (item.kind) {
        case Item::Kind::op: backward_op(item.op, block_rows, block); break;
        case Item::Kind::region: backward_region(item, 0, block); break;
        case Item::Kind::blocks: backward_blocks(item); break;
      }
    }
  }

  // Recompute the region's forward keeping what backward needs, then
  // differentiate through it; finally let go of what it kept. Saved tensors
  // are freed one by one as their backward ops run.
  void backward_region(const Item& item, std::int64_t block_rows, int block) {
    const int saved_context = context_;
    begin_context(item.children);
    // A nested (reentrant) checkpoint holds its recomputed outputs through
    // its own backward: one extra use that no op consumes.
    const bool hold_outputs = region_depth_ > 0 && profile_.nested_recompute_keeps_outputs;
    if (hold_outputs)
      for (TensorId t : item.outputs)
        if (made_here(t)) ++uses_[static_cast<std::size_t>(t)];
    forward(item.children, /*saving=*/true, block_rows, block, Pass::recompute);
    std::vector<int> held_outputs;
    if (hold_outputs)
      for (TensorId t : item.outputs)
        if (made_here(t) && current(t) >= 0) held_outputs.push_back(current(t));
    context_ = saved_context;
    ++region_depth_;
    backward(item.children, block_rows, block);
    --region_depth_;
    for (int b : held_outputs) release(b);
    for (int b : kept_inputs_.back()) release(b);
    kept_inputs_.pop_back();
  }

  void backward_blocks(const Item& item) {
    // The concat's backward hands each block a view of the output gradient.
    const int g = grad(item.output);
    grad(item.output) = -1;
    for (std::size_t b = item.block_rows.size(); b-- > 0;) {
      if (g >= 0) retain(g);
      grad(item.output) = g;
      backward_region(item, item.block_rows[b], static_cast<int>(b));
      if (grad(item.output) >= 0) release(grad(item.output));
      grad(item.output) = -1;
    }
    if (g >= 0) release(g);
  }

  void backward_op(OpId id, std::int64_t block_rows, int block) {
    const Op& op = g_.op(id);
    const OpMemoryRule& rule = profile_.rule(op.kind);
    std::vector<int> saved = std::move(saved_.back());
    saved_.pop_back();
    bool any_grad = false;
    for (TensorId t : op.outputs) any_grad = any_grad || grad(t) >= 0;
    if (any_grad) {
      const double scale =
          block_rows > 0 ? static_cast<double>(block_rows) / static_cast<double>(edge_rows_of(op)) : 1.0;
      account_backward(op, scale);
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
            allocate(x.bytes(), kGradients, 1);  // resident until the optimizer step
          } else {
            // Computed, then summed: in place (XLA), or out of place with
            // old, new and sum alive together (PyTorch).
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
          c = allocate(sliced ? block_rows * x.cols * x.element_bytes : bytes_of(t, block_rows), kGradients, 1);
        }
        // A block's view of a whole edge tensor (the concat's edge input):
        // the slice's backward pads its gradient to the full tensor.
        contributions.push_back({t, c, sliced});
      }
      if (rule.backward_scratch_copies > 0)
        transient += rule.backward_scratch_copies * bytes_of(op.inputs.front(), block_rows);
      live_[kWorkspace] += transient;
      sample(Pass::backward, op.step, block, op.name, op.stage);
      live_[kWorkspace] -= transient;
      for (const Contribution& c : contributions) accumulate(c.tensor, c.buffer, c.sliced);
    }
    for (TensorId t : op.outputs) {
      if (grad(t) >= 0) release(grad(t));
      grad(t) = -1;
    }
    for (int b : saved) release(b);
  }

  // Adds a gradient contribution into the tensor's gradient buffer.
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
      const int full = allocate(tensor(t).bytes(), kGradients, 1);
      sample_quiet();
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
    const int sum = allocate(tensor(t).bytes(), kGradients, 1);
    sample_quiet();
    release(b);
    release(c);
    b = sum;
  }

  // ---- accounting ------------------------------------------------------------
  double op_bytes(const Op& op) const {
    double bytes = 0;
    for (TensorId t : op.inputs) bytes += static_cast<double>(tensor(t).bytes());
    for (TensorId t : op.outputs) bytes += static_cast<double>(tensor(t).bytes());
    return bytes;
  }
  double roofline(double flops, double bytes) const {
    return std::max(flops / flops_per_s_, bytes / device_.bandwidth_bytes_per_s);
  }
  void account_forward(const Op& op, double scale, Pass pass) {
    const double flops = op.forward_flops * scale;
    (pass == Pass::recompute ? recompute_flops_ : forward_flops_) += flops;
    time_s_ += roofline(flops, op_bytes(op) * scale);
  }
  void account_backward(const Op& op, double scale) {
    const double flops = op.backward_flops * scale;
    backward_flops_ += flops;
    time_s_ += roofline(flops, 2.0 * op_bytes(op) * scale);
  }

  MemoryBreakdown live_breakdown() const {
    MemoryBreakdown b = static_;
    b.activations = live_[kActivations];
    b.gradients = live_[kGradients];
    b.workspace += live_[kWorkspace];
    return b;
  }

  // Records the live total at a point of the step: the peak, and a
  // timeline row when asked for.
  void sample(Pass pass, int step, int block, const std::string& op, int stage = -1) {
    at_ = {pass, step < 0 ? 0 : step, stage < 0 ? std::string{"optimizer"} : g_.stage_name(stage), op, block};
    const std::int64_t dynamic = live_[kActivations] + live_[kGradients] + live_[kWorkspace];
    if (pass != Pass::optimizer) peak_dynamic_ = std::max(peak_dynamic_, dynamic);
    if (dynamic > peak_total_dynamic_) {
      peak_total_dynamic_ = dynamic;
      peak_breakdown_ = live_breakdown();
      peak_at_ = at_;
    }
    if (options_.record_timeline) timeline_.push_back({at_, live_breakdown()});
  }
  // A transient inside the op last sampled (a gradient sum): counts for the
  // peak, not as a timeline row.
  void sample_quiet() {
    const std::int64_t dynamic = live_[kActivations] + live_[kGradients] + live_[kWorkspace];
    peak_dynamic_ = std::max(peak_dynamic_, dynamic);
    if (dynamic > peak_total_dynamic_) {
      peak_total_dynamic_ = dynamic;
      peak_breakdown_ = live_breakdown();
      peak_at_ = at_;
    }
  }

  const CostGraph& g_;
  const Device& device_;
  MemoryProfile profile_;
  Schedule schedule_;
  SimulationOptions options_;
  double flops_per_s_ = 1;

  std::vector<Buffer> buffers_;
  std::vector<int> free_slots_;
  std::vector<int> current_, grad_, uses_, produced_in_;
  std::vector<char> block_internal_, block_output_, param_grad_done_;
  std::vector<std::vector<int>> saved_;        // per saving op execution, in forward order
  std::vector<std::vector<int>> kept_inputs_;  // per checkpoint execution, in forward order
  std::vector<int> losses_;                    // held by the caller until backward
  int context_ = 0;
  int context_count_ = 0;
  int region_depth_ = 0;  // regions whose backward is under way
  bool collecting_block_output_ = false;

  std::int64_t live_[kCategories] = {0, 0, 0};
  MemoryBreakdown static_;
  std::int64_t peak_dynamic_ = 0, phase_peak_dynamic_ = 0, peak_total_dynamic_ = -1;
  MemoryBreakdown peak_breakdown_;
  StepLocation peak_at_, at_;
  std::vector<TimelinePoint> timeline_;
  double forward_flops_ = 0, backward_flops_ = 0, recompute_flops_ = 0, time_s_ = 0;
};

}  // namespace

Report simulate(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const Plan& plan,
                const SimulationOptions& options) {
  if (plan.edge_blocks.size() != graph.stages().size())
    throw std::invalid_argument("simulate: plan was not made for this model's stages");
  return Simulation(graph, device, plan, options).run(budget_bytes);
}

std::vector<std::int64_t> edges_per_stage(const CostGraph& graph) {
  const ModelDescription& m = graph.model();
  std::vector<std::int64_t> edges(graph.stages().size(), 0);
  edges.front() = m.grid2mesh_edges;
  for (std::size_t s = 2; s + 1 < edges.size(); ++s) edges[s] = m.mesh_edges;
  edges.back() = m.mesh2grid_edges;
  return edges;
}

}  // namespace actmem

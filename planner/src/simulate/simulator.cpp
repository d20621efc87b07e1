#include "actmem/simulate/simulator.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>

#include "actmem/simulate/accuracy_notes.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"

#include "simulate/loop_baselines.h"
#include "simulate/memory_machine.h"
#include "simulate/schedule.h"
#include "simulate/step_costs.h"
#include "simulate/xla_module_order.h"

namespace actmem {
namespace {

using detail::kActivations;
using detail::kGradients;
using detail::kWorkspace;

// A whole training step on the memory machine, with the step time (a
// roofline per op) and where the peak is.
class Simulation : detail::MemoryMachine {
 public:
  // `capture_at`: the number of the sample (counted from 1) at which to
  // list the live buffers, or 0.
  Simulation(const CostGraph& graph, const Device& device, const Plan& plan, const SimulationOptions& options,
             std::int64_t capture_at = 0)
      : MemoryMachine(graph),
        device_(device),
        schedule_(build_schedule(graph, plan)),
        options_(options),
        capture_at_(capture_at) {
    flops_per_s_ = detail::flops_per_second(graph.run(), device);
    validate_for_run(plan, graph, "plan");
    detail::MachineSetup setup;
    setup.offload_step_inputs = plan.host_offload && scanned();
    static_ = detail::static_breakdown(graph, device, profile_, scanned());
    // The targets, an argument in host memory, are not the device's.
    if (setup.offload_step_inputs)
      for (const Op& op : graph.ops())
        if (const TensorId target = detail::step_target(graph, op); target >= 0)
          static_.inputs -= graph.tensor(target).bytes();
    // A timeline has a row per op of every block.
    setup.bulk_equal_blocks = !options.record_timeline;
    if (!detail::blocked_edge_readers(graph, profile_).empty())  // J35 applies
      for (std::int64_t blocks : plan.edge_blocks) setup.blocked_edge_stages.push_back(blocks > 1 ? 1 : 0);
    const bool stacks = profile_.stacks_linearization_residuals(graph.run(), plan.step_checkpoint);
    setup.parameter_gradients_last = stacks && profile_.depth_first_parameter_gradients_last &&
                                     detail::xla_module_order(graph, plan) == detail::XlaModuleOrder::depth_first;
    set_up(std::move(setup));
    if (stacks) stack_linearization_residuals();
  }

  // J54's measure of each step's backward, from one run for the next.
  using MemoryMachine::assume_step_backward_bytes;
  using MemoryMachine::step_backward_bytes;
  using MemoryMachine::weight_gradients_by_operand_depth;

  // Whether the rollout runs as XLA's scanned loop: every step a loop body.
  bool scanned() const { return !schedule_.items.empty() && schedule_.items.front().loop_body; }

  // What a scanned rollout holds from before its forward loop to after its
  // backward loop besides the steps' buffers, in XLA:TPU's tiled layout:
  // its copy of each step's float32 target, node-major with the nodes
  // minor or DeepMind's per-variable arrays as the argument lays them out
  // (MemoryProfile::scanned_loops_copy_targets, J14, J26, J39), none when
  // the targets are in host memory (Plan::host_offload, J46); a copy of
  // each step's forcings in the activation dtype (scanned_loops_copy_forcings,
  // J39); and the first step's carry, a copy of the frames argument in the
  // carry's layout (MemoryProfile::scanned_loop_holds_first_carry, J20),
  // apart: where the steps' kept inputs go to host memory it goes with
  // them as the forward loop ends (release_first_carry_offloaded(), J49).
  std::vector<int> hold_around_scanned_loops() {
    std::vector<int> held;
    first_carry_ = -1;
    if (!scanned()) return held;
    const std::int64_t batch = g_.run().batch;
    for (const Op& op : g_.ops()) {
      if (const TensorId target = detail::step_target(g_, op);
          target >= 0 && profile_.scanned_loops_copy_targets && !offloads_step_inputs())
        held.push_back(allocate(detail::scanned_target_bytes(g_, target), kActivations, 1, target));
      if (op.kind != OpKind::next_input) continue;
      if (op.inputs.size() > 2 && profile_.scanned_loops_copy_forcings) {
        const Tensor& forcings = g_.tensor(op.inputs[2]);  // node-major: [nodes × batch, channels]
        held.push_back(
            allocate(tpu_tiled_bytes(forcings.rows / batch, forcings.cols, batch, element_bytes(g_.run().dtype)),
                     kActivations, 1, op.inputs[2]));
      }
      // The carry the first step reads is the frames argument, copied into
      // the layout and dtype the loop carries (the next carry's).
      if (op.step == 0 && op.inputs.size() > 1 && profile_.scanned_loop_holds_first_carry)
        first_carry_ = allocate(g_.tensor(op.outputs.front()).bytes(), kActivations, 1, op.inputs[1]);
    }
    return held;
  }
  void release_first_carry_offloaded() {
    if (first_carry_ < 0 || !offloads_step_inputs() || !profile_.offloaded_loop_moves_first_carry_to_host) return;
    release(first_carry_);
    first_carry_ = -1;
  }

  Report run(std::int64_t budget_bytes) {
    Report r;
    r.budget_bytes = budget_bytes;

    begin_context(schedule_.items);
    const std::vector<int> around_loops = hold_around_scanned_loops();
    // XLA's loops accumulate the gradients of the parameters the step reads
    // in buffers made before the forward loop (J50).
    if (profile_.holds_parameter_gradients_through_loops(g_.run()))
      for (const Op& op : g_.ops())
        for (TensorId t : op.inputs)
          if (const Tensor& x = g_.tensor(t);
              x.role == TensorRole::parameter && x.requires_grad && !parameter_gradient_made(t))
            hold_parameter_gradient(t);
    forward(schedule_.items, /*saving=*/true, 0, -1, Pass::forward);
    release_first_carry_offloaded();
    r.activation_bytes_after_forward = static_.activations + live(kActivations);
    r.forward_peak_bytes = static_.total() + peak_dynamic_;

    // Backward starts from d(loss)/d(loss) = 1 for every rollout step's loss
    // (and, in a scanned rollout, the discarded carry's zero cotangent).
    for (const Op& op : g_.ops()) seed_gradients(op);
    release_losses();
    hold_hoisted_norm_residual_copies(schedule_.items);
    backward(schedule_.items, 0, -1);
    release_stacked_residuals();
    for (int b : around_loops) release(b);
    if (first_carry_ >= 0) release(first_carry_);
    phase_peak_dynamic_ = peak_dynamic_;

    // Optimizer step: parameter gradients are all resident; updates in place.
    sample(Pass::optimizer, -1, -1, "optimizer");
    optimizer_bytes_ = static_.total() + live();
    cost_.time_s += static_cast<double>(g_.parameter_bytes()) * (g_.run().optimizer == Optimizer::adam ? 7.0 : 3.0) /
                    device_.bandwidth_bytes_per_s;

    r.peak_dynamic_bytes = phase_peak_dynamic_;
    r.breakdown = peak_breakdown_;
    r.peak_bytes = peak_breakdown_.total();
    r.peak_at = peak_at_;
    r.compiler_floor_bytes = static_.total() + floor_dynamic_;
    r.fits = r.peak_bytes <= budget_bytes || r.compiler_floor_bytes <= compiler_remat_limit(budget_bytes);
    r.forward_flops = cost_.forward_flops;
    r.backward_flops = cost_.backward_flops;
    r.recompute_flops = cost_.recompute_flops;
    r.step_time_s = cost_.time_s;
    r.timeline = std::move(timeline_);
    r.live_at_peak = std::move(peak_buffers_);
    return r;
  }
  // The number of the sample that set the peak (after run()).
  std::int64_t peak_sample() const { return peak_sample_; }
  // After run(): the memory as each loop body started, in the order they
  // ran (the last step's first), and at the optimizer step.
  const std::vector<std::int64_t>& loop_body_starts() const { return loop_body_starts_; }
  std::int64_t optimizer_bytes() const { return optimizer_bytes_; }

 private:
  // The peak the compiler rematerialises a program down to when it is over
  // it, and compiles it if it gets there (XLA:TPU: all the memory it has
  // for programs, docs/journal.md J7); without compiler
  // rematerialisation, no more than the budget.
  std::int64_t compiler_remat_limit(std::int64_t budget_bytes) const {
    if (profile_.compiler_remat_limit_fraction <= 0) return -1;
    const auto programs = static_cast<double>(budget_bytes - static_.reserved);
    return static_.reserved + static_cast<std::int64_t>(profile_.compiler_remat_limit_fraction * programs);
  }

  // ---- accounting ------------------------------------------------------------
  double op_bytes(const Op& op) const { return detail::bytes_moved(g_, op); }
  double roofline(double flops, double bytes) const { return detail::roofline_s(flops, bytes, flops_per_s_, device_); }
  void on_forward(const Op& op, double scale, Pass pass) override {
    const double flops = op.forward_flops * scale;
    (pass == Pass::recompute ? cost_.recompute_flops : cost_.forward_flops) += flops;
    cost_.time_s += roofline(flops, op_bytes(op) * scale);
  }
  void on_backward(const Op& op, double scale) override {
    const double flops = op.backward_flops * scale;
    cost_.backward_flops += flops;
    cost_.time_s += roofline(flops, 2.0 * op_bytes(op) * scale);
  }
  void on_loop_body_start() override { loop_body_starts_.push_back(static_.total() + live()); }
  void mark_block_cost() override { block_mark_ = cost_; }
  void repeat_block_cost(std::int64_t count) override {
    const auto n = static_cast<double>(count);
    cost_.forward_flops += n * (cost_.forward_flops - block_mark_.forward_flops);
    cost_.backward_flops += n * (cost_.backward_flops - block_mark_.backward_flops);
    cost_.recompute_flops += n * (cost_.recompute_flops - block_mark_.recompute_flops);
    cost_.time_s += n * (cost_.time_s - block_mark_.time_s);
  }

  MemoryBreakdown live_breakdown() const {
    MemoryBreakdown b = static_;
    b.activations += live(kActivations);
    b.gradients += live(kGradients);
    b.workspace += live(kWorkspace);
    return b;
  }

  void sample_op(Pass pass, const Op& op, int block) override { sample(pass, op.step, block, op.name, op.stage, &op); }
  void sample_concat(Pass pass, const Item& item) override {
    const Op& first = g_.op(item.first_op);
    sample(pass, first.step, -1, item.name + ".concat_blocks", first.stage);
  }

  // Records the live total at a point of the step: the peak, and a
  // timeline row when asked for.
  void sample(Pass pass, int step, int block, const std::string& op, int stage = -1, const Op* running = nullptr) {
    ++samples_;
    at_ = {pass, step < 0 ? 0 : step, stage < 0 ? std::string{"optimizer"} : g_.stage_name(stage), op, block};
    const std::int64_t dynamic = live();
    floor_dynamic_ = std::max(floor_dynamic_, dynamic - live_compiler_recomputable(running));
    if (pass != Pass::optimizer) peak_dynamic_ = std::max(peak_dynamic_, dynamic);
    if (dynamic > peak_total_dynamic_) new_peak(dynamic);
    if (options_.record_timeline) record(live_breakdown());
  }
  void record(const MemoryBreakdown& live) {
    if (timeline_.size() >= static_cast<std::size_t>(kMaxTimelineRows))
      throw InputError::argument(
          "timeline", fmt::format("the timeline would have more than {} rows (one per op run); simulate fewer edge "
                                  "blocks or a shorter rollout",
                                  kMaxTimelineRows));
    timeline_.push_back({at_, live});
  }
  // A transient inside the op last sampled (a gradient sum): counts for the
  // peak, not as a timeline row.
  void sample_transient() override {
    ++samples_;
    const std::int64_t dynamic = live();
    floor_dynamic_ = std::max(floor_dynamic_, dynamic - live_compiler_recomputable(nullptr));
    peak_dynamic_ = std::max(peak_dynamic_, dynamic);
    if (dynamic > peak_total_dynamic_) new_peak(dynamic);
  }
  void new_peak(std::int64_t dynamic) {
    peak_total_dynamic_ = dynamic;
    peak_breakdown_ = live_breakdown();
    peak_at_ = at_;
    peak_sample_ = samples_;
    if (samples_ == capture_at_) peak_buffers_ = live_buffers();
  }

  const Device& device_;
  Schedule schedule_;
  SimulationOptions options_;
  std::int64_t capture_at_ = 0, samples_ = 0, peak_sample_ = 0;
  double flops_per_s_ = 1;

  MemoryBreakdown static_;
  std::int64_t peak_dynamic_ = 0, phase_peak_dynamic_ = 0, peak_total_dynamic_ = -1;
  std::int64_t floor_dynamic_ = 0;  // the peak without what the compiler may recompute
  MemoryBreakdown peak_breakdown_;
  StepLocation peak_at_, at_;
  std::vector<TimelinePoint> timeline_;
  std::vector<PeakBuffer> peak_buffers_;
  struct Cost {
    double forward_flops = 0, backward_flops = 0, recompute_flops = 0, time_s = 0;
  };
  Cost cost_, block_mark_;
  std::vector<std::int64_t> loop_body_starts_;
  std::int64_t optimizer_bytes_ = 0;
  int first_carry_ = -1;  // J20's copy of the frames argument, while held
};

}  // namespace

Report simulate(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const Plan& plan,
                const SimulationOptions& options) {
  budget_within(device, budget_bytes, "budget");  // a larger budget would answer "fits" for what cannot
  validate(plan, graph.chain());
  std::vector<std::int64_t> step_backward_bytes;
  const auto simulation = [&](std::int64_t capture_at) {
    auto s = std::make_unique<Simulation>(graph, device, plan, options, capture_at);
    s->assume_step_backward_bytes(step_backward_bytes);
    return s;
  };
  std::unique_ptr<Simulation> s = simulation(0);
  // Where XLA's depth-first order decides which weight gradients wait by
  // how much each step's backward allocates (J54), a first run measures
  // that for the run after it.
  if (s->weight_gradients_by_operand_depth()) {
    s->run(budget_bytes);
    step_backward_bytes = s->step_backward_bytes();
    s = simulation(0);
  }
  Report report = s->run(budget_bytes);
  // The peak rises at most samples, and listing the live buffers at each
  // rise cost O(ops²) (100 s at GraphCast rollout 100): the run above found
  // the sample of the peak; the same run again lists the buffers there.
  if (options.record_peak_buffers) report = simulation(s->peak_sample())->run(budget_bytes);
  report.notes = accuracy_notes(graph, device, plan);
  return report;
}

namespace detail {

LoopBaselines loop_baselines(const CostGraph& graph, const Device& device, const Plan& plan) {
  validate(plan, graph.chain());
  if (!plan.step_checkpoint || graph.run().rollout < 2)
    throw std::logic_error("loop_baselines: the plan does not checkpoint each rollout step");
  Simulation s(graph, device, plan, {});
  s.run(device.memory_bytes);
  LoopBaselines b;
  b.body_start_bytes.assign(s.loop_body_starts().rbegin(), s.loop_body_starts().rend());
  b.optimizer_bytes = s.optimizer_bytes();
  return b;
}

}  // namespace detail

}  // namespace actmem

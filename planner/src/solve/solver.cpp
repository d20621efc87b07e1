// solve(), minimum_memory(), pareto_frontier(): the search's frontier
// (solver_search.h), with every returned figure re-simulated.
#include "actmem/solve/solver.h"

#include <algorithm>
#include <limits>
#include <optional>
#include <stdexcept>
#include <utility>

#include "actmem/simulate/simulator.h"
#include "actmem/util/limits.h"
#include "solve/solver_model.h"
#include "solve/solver_search.h"

namespace actmem {
namespace {

detail::SearchSpace space_of(const SolverOptions& options) {
  detail::SearchSpace space;
  space.block_choices = options.block_choices;
  if (space.block_choices.empty())
    for (std::int64_t b = 1; b <= 1024; b *= 2) space.block_choices.push_back(b);
  std::sort(space.block_choices.begin(), space.block_choices.end());
  space.block_choices.erase(std::unique(space.block_choices.begin(), space.block_choices.end()),
                            space.block_choices.end());
  space.block_choices.erase(std::remove_if(space.block_choices.begin(), space.block_choices.end(),
                                           [](std::int64_t b) { return b < 1 || b > kMaxEdgeBlocks; }),
                            space.block_choices.end());
  if (space.block_choices.empty() || space.block_choices.front() != 1)
    space.block_choices.insert(space.block_choices.begin(), 1);
  space.nested_regions = options.allow_nested_regions;
  return space;
}

CostGraph at_rollout(const CostGraph& graph, std::int64_t rollout) {
  RunOptions run = graph.run();
  run.rollout = rollout;
  return CostGraph::build(graph.model(), run);
}

// A step-checkpointed plan's peak and step time at a graph's rollout r,
// simulated at r when r <= 4, else read off the line through rollouts 3
// and 4. The schedule is one step repeated: a first step, middle steps and
// a last, each class's moments with live bytes affine in r and in the
// step's index. From r = 3, when all three classes are there, the peak,
// the maximum over moments and steps, is convex piecewise-linear in r, so
// the line through r = 3 and 4 bounds it from below at every r >= 4 (at
// r = 2 there is no middle step, whose gradient of the carry the peak may
// hold: rollouts 2 and 3 would not do). So does the line of the forward
// pass's own peak, the same argument over fewer moments; it is the tighter
// one where the peak moves into the forward pass at long rollouts
// (PyTorch). Tested on random plans; docs/solver.md "Rollout steps". Step
// time is a sum over steps, affine in r, so the line gives it.
class RolloutLine {
 public:
  RolloutLine(const CostGraph& graph, const Device& device) : graph_(graph), device_(device) {
    if (graph.run().rollout > 4) {
      three_.emplace(at_rollout(graph, 3));
      four_.emplace(at_rollout(graph, 4));
    }
  }

  bool extrapolates() const { return three_.has_value(); }

  // (peak bytes, step seconds): exact when !extrapolates(), else the peak
  // is a lower bound.
  std::pair<std::int64_t, double> figures(const Plan& plan) const {
    if (!extrapolates()) {
      const Report r = simulate(graph_, device_, device_.memory_bytes, plan);
      return {r.peak_bytes, r.step_time_s};
    }
    const Report three = simulate(*three_, device_, device_.memory_bytes, plan);
    const Report four = simulate(*four_, device_, device_.memory_bytes, plan);
    // Per-step growth times fewer than 2^10 steps: within the full graph's
    // byte totals, which are below 2^62 (checked_math.h).
    const std::int64_t more_steps = graph_.run().rollout - 4;
    const auto line = [more_steps](std::int64_t at3, std::int64_t at4) { return at4 + more_steps * (at4 - at3); };
    return {std::max(line(three.peak_bytes, four.peak_bytes), line(three.forward_peak_bytes, four.forward_peak_bytes)),
            four.step_time_s + static_cast<double>(more_steps) * (four.step_time_s - three.step_time_s)};
  }

 private:
  const CostGraph& graph_;
  const Device& device_;
  std::optional<CostGraph> three_, four_;
};

// Plans with every rollout step under a checkpoint (rollout > 1) where the
// rollout is not a scanned loop (PyTorch): inside the step, the plans of
// the one-step frontier. Under a step checkpoint each step is recomputed
// alone, so a plan good for one step is good inside it; this part of the
// space is covered by that frontier, not searched exhaustively
// (docs/solver.md). Figures from RolloutLine.
std::vector<detail::Candidate> step_checkpointed(const CostGraph& graph, const Device& device,
                                                 const SolverOptions& options) {
  const CostGraph step = at_rollout(graph, 1);
  detail::ChainModel model(step, device);
  const RolloutLine line(graph, device);
  const double none_s = line.figures(empty_plan(graph.stages())).second;
  std::vector<detail::Candidate> out;
  for (detail::Candidate c : detail::search_frontier(model, space_of(options))) {
    c.plan.step_checkpoint = true;
    const auto [peak_bytes, step_s] = line.figures(c.plan);
    c.peak_bytes = peak_bytes;
    c.recompute_s = step_s - none_s;
    c.peak_is_bound = line.extrapolates();
    out.push_back(std::move(c));
  }
  return out;
}

// The same plans where the rollout is a scanned loop (MemoryProfile::
// step_checkpoint_scanned), searched exactly: the loop-body chain model
// (solver_model.h LoopBody) predicts every plan's peak at the full rollout,
// from what one simulation measures the loop holding around each body.
// `host_offload`: with the rollout's per-step state in host memory
// (Plan::host_offload), which changes what the loop holds around each
// body, not the body's work.
std::vector<detail::Candidate> loop_body_plans(const CostGraph& graph, const Device& device,
                                               const SolverOptions& options, bool host_offload = false) {
  const CostGraph body = at_rollout(graph, std::min<std::int64_t>(graph.run().rollout, 3));
  detail::ChainModel model(body, device, detail::loop_body_of(graph, device, host_offload));
  std::vector<detail::Candidate> out = detail::search_frontier(model, space_of(options));
  for (detail::Candidate& c : out) {
    c.plan.step_checkpoint = true;
    c.plan.host_offload = host_offload;
  }
  return out;
}

// The search's frontier, with the step-checkpointed plans for rollout > 1,
// by increasing peak (exact or a lower bound). A plan is dropped when one
// with an exact peak no higher is no slower; a bound cannot drop a plan, it
// does not say how high its own peak goes.
std::vector<detail::Candidate> frontier_of(const CostGraph& graph, const Device& device, const SolverOptions& options) {
  // JAX at rollout > 1: only step-checkpointed plans
  // (detail::chain_model_covers_unstepped_plans).
  std::vector<detail::Candidate> all;
  if (detail::chain_model_covers_unstepped_plans(graph)) {
    detail::ChainModel model(graph, device);
    all = detail::search_frontier(model, space_of(options));
    if (graph.run().rollout == 1) return all;
  }
  for (detail::Candidate& c : detail::step_checkpoints_searched_exactly(graph)
                                  ? loop_body_plans(graph, device, options)
                                  : step_checkpointed(graph, device, options))
    all.push_back(std::move(c));
  std::stable_sort(all.begin(), all.end(), [](const detail::Candidate& a, const detail::Candidate& b) {
    return a.peak_bytes != b.peak_bytes ? a.peak_bytes < b.peak_bytes : a.recompute_s < b.recompute_s;
  });
  std::vector<detail::Candidate> front;
  double fastest_exact = std::numeric_limits<double>::infinity();
  for (detail::Candidate& c : all) {
    if (c.recompute_s >= fastest_exact) continue;
    if (!c.peak_is_bound) fastest_exact = c.recompute_s;
    front.push_back(std::move(c));
  }
  return front;
}

// The least-peak plan of the frontier, simulated, the fastest of those
// with that peak: candidates in order of peak until the next cannot reach
// the least simulated so far (its peak exact, or a lower bound, above it).
// Should the simulator disagree with an exact peak or undercut a bound,
// every candidate is simulated. Step times equal but for rounding (plans
// that differ only in how finely a region's edges are blocked) keep the
// one found first, so that the answer does not flip on the last bit.
constexpr double kSameTime = 1e-9;  // relative
Solution least_peak(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                    const std::vector<detail::Candidate>& frontier) {
  Solution s;
  bool have = false, trusted = true;
  for (const detail::Candidate& c : frontier) {
    if (have && trusted && c.peak_bytes > s.report.peak_bytes) break;
    Report r = simulate(graph, device, budget_bytes, c.plan);
    trusted = trusted && (c.peak_is_bound ? r.peak_bytes >= c.peak_bytes : r.peak_bytes == c.peak_bytes);
    const bool better = !have || r.peak_bytes < s.report.peak_bytes ||
                        (r.peak_bytes == s.report.peak_bytes && r.step_time_s < s.report.step_time_s * (1 - kSameTime));
    if (better) {
      s.plan = c.plan;
      s.report = std::move(r);
      have = true;
    }
  }
  s.min_peak_bytes = s.report.peak_bytes;
  s.feasible = s.report.fits;
  return s;
}

// Where nothing fits as written the least-peak plan is returned, and a
// plan's peak is then what the search minimises; but edge blocks cost
// nothing in the model, and a plan blocked finer than the model resolves
// only lengthens the program (JAX: 16 stages of 1,024 blocks did not lower
// in 21 minutes within 20 GB, docs/solver.md). So where that plan still
// fits (through the compiler's rematerialisation) its edge blocks are
// capped at the least of `block_choices` that keeps its peak within
// kBlockingResolution of the least and the verdict; a plan that does not
// fit stays the least-memory one, which says what is needed.
constexpr double kBlockingResolution = 0.02;  // the accuracy goal
Solution coarsened(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                   const std::vector<std::int64_t>& block_choices, Solution least) {
  if (!least.report.fits) return least;
  const std::int64_t finest = *std::max_element(least.plan.edge_blocks.begin(), least.plan.edge_blocks.end());
  const auto within = static_cast<std::int64_t>(static_cast<double>(least.report.peak_bytes) * kBlockingResolution);
  for (std::int64_t cap : block_choices) {
    if (cap >= finest) break;
    Plan plan = least.plan;
    for (std::int64_t& b : plan.edge_blocks) b = std::min(b, cap);
    Report r = simulate(graph, device, budget_bytes, plan);
    if (!r.fits || r.peak_bytes > least.report.peak_bytes + within) continue;
    least.plan = std::move(plan);
    least.report = std::move(r);
    break;
  }
  return least;
}

// The fastest plan of `frontier` that fits, else its least-peak plan
// (coarsened()).
Solution fastest_fitting(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                         const std::vector<std::int64_t>& block_choices,
                         const std::vector<detail::Candidate>& frontier) {
  Solution least = least_peak(graph, device, budget_bytes, frontier);
  // The fastest candidate the model says fits as written (or whose peak's
  // lower bound does), confirmed by the simulator; if the simulator disagrees, the next fastest (never an
  // infeasible plan returned as feasible). When none fits as written, the
  // least-peak plan, which still fits where the compiler's own
  // rematerialisation gets it under its limit (JAX; Report::fits).
  std::vector<const detail::Candidate*> fitting;
  for (const detail::Candidate& c : frontier)
    if (c.peak_bytes <= budget_bytes) fitting.push_back(&c);
  std::sort(fitting.begin(), fitting.end(), [](const detail::Candidate* a, const detail::Candidate* b) {
    return a->recompute_s != b->recompute_s ? a->recompute_s < b->recompute_s : a->peak_bytes < b->peak_bytes;
  });
  for (const detail::Candidate* c : fitting) {
    Report r = simulate(graph, device, budget_bytes, c->plan);
    if (!r.fits || r.peak_bytes > budget_bytes) continue;  // a bound's plan may not fit as written
    Solution s;
    s.feasible = true;
    s.plan = c->plan;
    s.report = std::move(r);
    s.min_peak_bytes = least.min_peak_bytes;
    return s;
  }
  return coarsened(graph, device, budget_bytes, block_choices, std::move(least));
}

}  // namespace

Solution solve(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const SolverOptions& options) {
  const std::vector<std::int64_t> block_choices = space_of(options).block_choices;
  Solution on_device = fastest_fitting(graph, device, budget_bytes, block_choices, frontier_of(graph, device, options));
  if (on_device.feasible || !options.allow_host_offload || graph.run().rollout < 2 ||
      !detail::step_checkpoints_searched_exactly(graph))
    return on_device;
  // Nothing fits on the device alone: the rollout's per-step state in host
  // memory, searched exactly by the loop body's model as the plans without.
  // If nothing fits either way, the least-peak plan of the two searches.
  Solution offloaded = fastest_fitting(graph, device, budget_bytes, block_choices,
                                       loop_body_plans(graph, device, options, /*host_offload=*/true));
  return offloaded.feasible || offloaded.min_peak_bytes < on_device.min_peak_bytes ? offloaded : on_device;
}

Plan fastest_plan(const CostGraph& graph) {
  Plan plan = empty_plan(graph.stages());
  plan.step_checkpoint = !detail::chain_model_covers_unstepped_plans(graph);
  return plan;
}

std::vector<Solution> solve_each(const CostGraph& graph, const std::vector<Device>& devices,
                                 const std::vector<std::int64_t>& budgets, const SolverOptions& options) {
  if (budgets.size() != devices.size()) throw std::invalid_argument("solve_each: expected a budget for each device");
  const Plan fastest = fastest_plan(graph);
  std::vector<Solution> out(devices.size());
  std::vector<std::size_t> fastest_fits;
  // The least peak on the device less its reserve, the same on every
  // device: from a solve() that kept everything on the device, or searched.
  // Not where the space itself is shaped by the device's speed: PyTorch's
  // step-checkpointed plans are the one-step frontier's, whose trade-offs
  // are the device's times; there each device's least is its own.
  const bool same_space = graph.run().rollout == 1 || detail::step_checkpoints_searched_exactly(graph);
  std::optional<std::int64_t> least;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (budgets[i] == 0) {
      out[i] = solve(graph, devices[i], 1, options);
      out[i].feasible = out[i].report.fits = false;
      out[i].report.budget_bytes = 0;
    } else if (Report r = simulate(graph, devices[i], budgets[i], fastest); r.peak_bytes <= budgets[i]) {
      out[i].feasible = true;
      out[i].plan = fastest;
      out[i].report = std::move(r);
      fastest_fits.push_back(i);
      continue;
    } else {
      out[i] = solve(graph, devices[i], budgets[i], options);
    }
    if (!least && !out[i].plan.host_offload) least = out[i].min_peak_bytes - devices[i].reserve_bytes;
  }
  for (std::size_t i : fastest_fits) {
    if (!least || !same_space)
      least = minimum_memory(graph, devices[i], options).min_peak_bytes - devices[i].reserve_bytes;
    out[i].min_peak_bytes = *least + devices[i].reserve_bytes;
  }
  return out;
}

Solution minimum_memory(const CostGraph& graph, const Device& device, const SolverOptions& options) {
  const std::vector<detail::Candidate> frontier = frontier_of(graph, device, options);
  Solution s = least_peak(graph, device, device.memory_bytes, frontier);
  s.report.budget_bytes = s.min_peak_bytes;
  s.report.fits = true;
  s.feasible = true;
  return s;
}

std::vector<ParetoPoint> pareto_frontier(const CostGraph& graph, const Device& device, const SolverOptions& options) {
  std::vector<ParetoPoint> points;
  for (const detail::Candidate& c : frontier_of(graph, device, options))
    points.push_back({c.plan, simulate(graph, device, device.memory_bytes, c.plan)});
  std::sort(points.begin(), points.end(), [](const ParetoPoint& a, const ParetoPoint& b) {
    if (a.report.peak_bytes != b.report.peak_bytes) return a.report.peak_bytes < b.report.peak_bytes;
    return a.report.step_time_s < b.report.step_time_s;
  });
  std::vector<ParetoPoint> front;
  for (ParetoPoint& p : points)
    if (front.empty() || p.report.step_time_s < front.back().report.step_time_s) front.push_back(std::move(p));
  return front;
}

}  // namespace actmem

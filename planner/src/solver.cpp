// solve(), minimum_memory(), pareto_frontier(): the search's frontier
// (solver_search.h), with every returned figure re-simulated.
#include "actmem/solver.h"

#include <algorithm>

#include "actmem/limits.h"
#include "actmem/simulator.h"
#include "solver_model.h"
#include "solver_search.h"

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

// Plans with every rollout step under a checkpoint (rollout > 1): inside
// the step, the plans of the one-step frontier, each simulated at the full
// rollout. Under a step checkpoint each step is recomputed alone, so a plan
// good for one step is good inside it; this part of the space is covered by
// that frontier, not searched exhaustively (docs/solver.md).
std::vector<detail::Candidate> step_checkpointed(const CostGraph& graph, const Device& device,
                                                 const SolverOptions& options) {
  RunOptions one_step = graph.run();
  one_step.rollout = 1;
  const CostGraph step = CostGraph::build(graph.model(), one_step);
  detail::ChainModel model(step, device);
  const double none_s = simulate(graph, device, device.memory_bytes, empty_plan(graph.stages())).step_time_s;
  std::vector<detail::Candidate> out;
  for (detail::Candidate c : detail::search_frontier(model, space_of(options))) {
    c.plan.step_checkpoint = true;
    const Report r = simulate(graph, device, device.memory_bytes, c.plan);
    c.peak_bytes = r.peak_bytes;
    c.recompute_s = r.step_time_s - none_s;
    out.push_back(std::move(c));
  }
  return out;
}

// The search's frontier, with the step-checkpointed plans for rollout > 1,
// by increasing peak, dominated plans dropped.
std::vector<detail::Candidate> frontier_of(const CostGraph& graph, const Device& device, const SolverOptions& options) {
  // Only plans whose memory actmem models (memory_modelled(): JAX at
  // rollout > 1 checkpoints every step).
  std::vector<detail::Candidate> all;
  if (memory_modelled(graph.run(), empty_plan(graph.stages()))) {
    detail::ChainModel model(graph, device);
    all = detail::search_frontier(model, space_of(options));
    if (graph.run().rollout == 1) return all;
  }
  for (detail::Candidate& c : step_checkpointed(graph, device, options)) all.push_back(std::move(c));
  std::stable_sort(all.begin(), all.end(), [](const detail::Candidate& a, const detail::Candidate& b) {
    return a.peak_bytes != b.peak_bytes ? a.peak_bytes < b.peak_bytes : a.recompute_s < b.recompute_s;
  });
  std::vector<detail::Candidate> front;
  for (detail::Candidate& c : all)
    if (front.empty() || c.recompute_s < front.back().recompute_s) front.push_back(std::move(c));
  return front;
}

// The least-peak plan of the frontier, simulated. The model's peaks are
// exact (tests), so the first candidate is the least; should the simulator
// disagree, every candidate is simulated and the least taken.
Solution least_peak(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                    const std::vector<detail::Candidate>& frontier) {
  Solution s;
  s.plan = frontier.front().plan;
  s.report = simulate(graph, device, budget_bytes, s.plan);
  if (s.report.peak_bytes != frontier.front().peak_bytes) {
    for (const detail::Candidate& c : frontier) {
      Report r = simulate(graph, device, budget_bytes, c.plan);
      if (r.peak_bytes < s.report.peak_bytes) {
        s.plan = c.plan;
        s.report = std::move(r);
      }
    }
  }
  s.min_peak_bytes = s.report.peak_bytes;
  s.feasible = s.report.fits;
  return s;
}

}  // namespace

Solution solve(const CostGraph& graph, const Device& device, std::int64_t budget_bytes, const SolverOptions& options) {
  const std::vector<detail::Candidate> frontier = frontier_of(graph, device, options);
  Solution least = least_peak(graph, device, budget_bytes, frontier);
  // The fastest candidate the model says fits as written, confirmed by the
  // simulator; if the simulator disagrees, the next fastest (never an
  // infeasible plan returned as feasible). When none fits as written, the
  // least-peak plan, which still fits where the compiler's own
  // rematerialisation gets it under its limit (JAX; Report::fits).
  std::vector<const detail::Candidate*> fitting;
  for (const detail::Candidate& c : frontier)
    if (c.peak_bytes <= budget_bytes) fitting.push_back(&c);
  std::sort(fitting.begin(), fitting.end(),
            [](const detail::Candidate* a, const detail::Candidate* b) { return a->recompute_s < b->recompute_s; });
  for (const detail::Candidate* c : fitting) {
    Report r = simulate(graph, device, budget_bytes, c->plan);
    if (!r.fits) continue;
    Solution s;
    s.feasible = true;
    s.plan = c->plan;
    s.report = std::move(r);
    s.min_peak_bytes = least.min_peak_bytes;
    return s;
  }
  return least;
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

// The C++ side of the ILP agreement check (docs/solver.md "Independent
// optimum: an ILP"): writes one random small instance as a mixed-integer
// program, with actmem's own answers at the instance's budgets, and checks
// an ILP solution against simulate() and against those answers.
//
//   ilp_instances write SEED INDEX NESTED(0|1) MAX_STAGES BUDGETS OUT.json
//   ilp_instances check INSTANCE.json SOLUTION.json
//
// The program. One binary per *column*: stage s runs in role
// (plain | plain child of region [a, b] | inside inner region [c, d] of
// region [a, b]) with B edge blocks, given the gradients in flight when its
// backward starts (a state at boundary s + 1), handing on a state at s.
// Equalities: one column per stage; the state a stage hands on is the one
// the stage before it takes; a region's (an inner region's) stages all
// choose it. Memory: for every event of the simulator's schedule (the
// forward of each stage, the loss, each recomputation, inner recomputation
// and backward, the end) the memory there is a linear sum over the columns,
// each column's coefficient depending only on its own role and on where the
// event lies relative to its stage; each such sum plus the static bytes is
// at most the budget. Objective: the recompute time. The coefficients come
// from ChainModel's per-stage replays (shared with actmem's solver); the
// composition and the search are the program's and HiGHS's.
//
// `check` prints one JSON line per budget and exits 1 if any disagrees.
#include <algorithm>
#include <array>
#include <ctime>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actmem/cost_graph.h"
#include "actmem/device.h"
#include "actmem/model.h"
#include "actmem/simulator.h"
#include "actmem/solver.h"
#include "solver_model.h"

using namespace actmem;
using nlohmann::json;

namespace {

const char* const kDevice = "a100-80gb";
const std::vector<std::int64_t> kBlockChoices{1, 2, 4};

enum Kind { kPlain = 0, kChild = 1, kInner = 2 };

struct Role {
  int kind = kPlain;
  int a = -1, b = -1;  // region (kChild, kInner)
  int c = -1, d = -1;  // inner region (kInner)
  bool in_region(int u) const { return kind != kPlain && a <= u && u <= b; }
  bool in_inner(int u) const { return kind == kInner && c <= u && u <= d; }
};

// One stage in one role with one block count, given the gradients in
// flight: its memory effects by phase (relative to the memory before each
// execution) and its recompute time.
struct Column {
  int stage = 0;
  Role role;
  std::int64_t blocks = 1;
  int in_state = 0, out_state = 0;  // at boundaries stage + 1 and stage
  std::int64_t f = 0, f_peak = 0;    // original forward
  std::int64_t r = 0, r_peak = 0;    // the region's recomputation (kChild, kInner)
  std::int64_t ir = 0, ir_peak = 0;  // the inner region's recomputation (kInner)
  std::int64_t b = 0, b_peak = 0;    // backward
  std::int64_t released_inner = 0;   // freed when the inner region's backward ends
  std::int64_t released_region = 0;  // freed when the region's backward ends
  double time_s = 0;
  // Everything the stage adds from the end of the loss's backward on.
  std::int64_t backward_total() const { return r + ir + b - released_inner - released_region; }
};

// The events of the schedule, per stage u: its forward (F), its
// recomputation in its region (R), its recomputation in its inner region
// (I), its backward (B); and the loss's forward and backward, and the end.
// Where a stage has no such execution (R of a plain stage), the event is
// the moment before its next execution, a real state of the schedule too.
enum Event { kF, kR, kI, kB };

// Memory at event `e` of stage u that column `col` accounts for (without
// the loss's constants): what its stage's executions before that moment
// added, plus its own local peak when the event is its own execution.
std::int64_t coefficient(Event e, int u, const Column& col) {
  const int t = col.stage;
  if (e == kF) return t < u ? col.f : t == u ? col.f_peak : 0;
  // Every backward-phase event comes after the whole forward pass.
  std::int64_t v = col.f;
  const Role& role = col.role;
  if (t == u) {
    switch (e) {
      case kR: return v + (role.kind == kPlain ? 0 : col.r_peak);
      case kI: return v + (role.kind == kPlain ? 0 : role.kind == kChild ? col.r : col.r + col.ir_peak);
      default: return v + (role.kind == kPlain ? col.b_peak : role.kind == kChild ? col.r + col.b_peak : col.r + col.ir + col.b_peak);
    }
  }
  if (!role.in_region(u)) return v + (t > u ? col.backward_total() : 0);  // another segment
  // The same region: it recomputes left to right, then runs backward right
  // to left, an inner region recomputing (saving) when its backward starts.
  const bool same_inner = role.in_inner(u);
  switch (e) {
    case kR: return v + (t < u ? col.r : 0);
    case kI:
      if (t < u) return v + col.r + (same_inner ? col.ir : 0);
      return v + col.r + (same_inner ? 0 : col.ir + col.b - col.released_inner);
    default:
      if (t < u) return v + col.r + (same_inner ? col.ir : 0);
      return v + col.r + col.ir + col.b - (same_inner ? 0 : col.released_inner);
  }
}

std::vector<Role> roles_of(int s, int n, bool nested) {
  std::vector<Role> out{Role{}};
  for (int a = 0; a <= s; ++a)
    for (int b = s; b < n; ++b) {
      out.push_back({kChild, a, b, -1, -1});
      if (!nested) continue;
      for (int c = a; c <= s; ++c)
        for (int d = s; d <= b; ++d) out.push_back({kInner, a, b, c, d});
    }
  return out;
}

// A random small GraphCast (4..8 stages) in a random run configuration.
json random_instance(std::uint64_t seed, int index, int max_stages) {
  std::mt19937_64 rng(seed * 1000003u + static_cast<std::uint64_t>(index));
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
  };
  const char* implementations[] = {"deepmind", "physicsnemo", "anemoi"};
  const char* implementation = implementations[pick(0, 2)];
  // JAX reads two input frames of C_t channels, 5 forcings and 5 static
  // channels, and predicts at least C_t - 5 (graphcast_builder.cpp).
  const std::int64_t time_channels = pick(5, 20);
  json model{{"name", "ilp-" + std::to_string(index)},
             {"architecture", "graphcast"},
             {"implementation", implementation},
             {"concat_trick", std::string(implementation) == "physicsnemo" && pick(0, 1) == 1},
             {"grid_nodes", pick(200, 4000)},
             {"mesh_nodes", pick(50, 1000)},
             {"grid2mesh_edges", pick(400, 8000)},
             {"mesh_edges", pick(200, 6000)},
             {"mesh2grid_edges", pick(400, 12000)},
             {"latent_size", std::int64_t{8} << pick(0, 4)},
             {"mlp_hidden_layers", pick(1, 2)},
             {"processor_steps", pick(1, std::clamp(max_stages, 4, 8) - 3)},
             {"grid_input_features", 2 * time_channels + 10},
             {"mesh_input_features", pick(2, 20)},
             {"edge_features", pick(2, 8)},
             {"output_features", pick(std::max<std::int64_t>(1, time_channels - 5), time_channels + 10)}};
  RunOptions run;
  run.framework = pick(0, 1) ? Framework::jax : Framework::pytorch;
  run.dtype = pick(0, 1) ? DType::bfloat16 : DType::float32;
  run.batch = pick(1, 2);
  run.rollout = 1;
  return {{"seed", seed}, {"index", index}, {"model", model}, {"run", to_json(run)}, {"device", kDevice}};
}

CostGraph graph_of(const json& instance) {
  return CostGraph::build(model_from_json(instance.at("model"), "instance model"),
                          run_options_from_json(instance.at("run"), "instance run", "/run"));
}

SolverOptions options_of(bool nested) {
  SolverOptions options;
  options.block_choices = kBlockChoices;
  options.allow_nested_regions = nested;
  return options;
}

// The program's columns and rows for one instance.
struct Program {
  std::vector<Column> columns;
  struct Row {
    std::string name;
    std::int64_t constant = 0;
    std::vector<std::int64_t> coefficients;  // per column
  };
  std::vector<Row> memory;  // each: static + constant + sum <= budget
  struct Equality {
    std::vector<std::pair<int, int>> terms;  // (column, +1/-1)
    int rhs = 0;
  };
  std::vector<Equality> equalities;
};

Program build_program(const CostGraph& g, const Device& device, bool nested) {
  detail::ChainModel model(g, device);
  const int n = model.stage_count();
  const auto edges = edges_per_stage(g);
  Program p;
  // States (gradients in flight, the full map) per boundary, by identity.
  std::vector<std::map<detail::GradState, int>> states(static_cast<std::size_t>(n + 1));
  std::vector<std::vector<const detail::GradState*>> state_list(static_cast<std::size_t>(n + 1));
  auto intern = [&](int boundary, const detail::GradState& s) {
    auto& m = states[static_cast<std::size_t>(boundary)];
    auto [it, fresh] = m.emplace(s, static_cast<int>(m.size()));
    if (fresh) state_list[static_cast<std::size_t>(boundary)].push_back(&it->first);
    return it->second;
  };
  const detail::Effect& loss_forward = model.loss(0);
  const detail::Effect& loss_backward = model.loss(0, model.signature(0, n, {}));
  detail::GradState after_loss;
  detail::ChainModel::hand_over(loss_backward, after_loss);
  intern(n, after_loss);
  for (int s = n - 1; s >= 0; --s) {
    std::vector<std::int64_t> blocks{1};
    if (edges[static_cast<std::size_t>(s)] > 0)
      for (std::int64_t b : kBlockChoices)
        if (b > 1 && b <= edges[static_cast<std::size_t>(s)]) blocks.push_back(b);
    const std::vector<Role> roles = roles_of(s, n, nested);
    for (std::size_t gi = 0; gi < state_list[static_cast<std::size_t>(s + 1)].size(); ++gi) {
      const detail::GradState state = *state_list[static_cast<std::size_t>(s + 1)][gi];
      const std::vector<std::int64_t> in = model.signature(0, s, state);
      for (const Role& role : roles)
        for (std::int64_t blk : blocks) {
          Column col;
          col.stage = s;
          col.role = role;
          col.blocks = blk;
          col.in_state = static_cast<int>(gi);
          const detail::Effect* backward = nullptr;
          if (role.kind == kPlain) {
            const detail::Effect& e = model.plain(0, s, blk, in);
            col.f = e.forward_delta;
            col.f_peak = e.forward_peak;
            backward = &e;
          } else {
            const detail::Effect& fw = model.region_forward(0, s, blk, role.a);
            col.f = fw.forward_delta;
            col.f_peak = fw.forward_peak;
            if (role.kind == kChild) {
              const detail::Effect& rc = model.recompute_plain(0, s, blk, role.a, role.b, in);
              col.r = rc.forward_delta;
              col.r_peak = rc.forward_peak;
              backward = &rc;
            } else {
              const detail::Effect& rc = model.recompute_in_inner(0, s, blk, role.a, role.b, role.c);
              col.r = rc.forward_delta;
              col.r_peak = rc.forward_peak;
              const detail::Effect& inner = model.inner_recompute(0, s, blk, role.c, role.d, in);
              col.ir = inner.forward_delta;
              col.ir_peak = inner.forward_peak;
              col.released_inner = inner.released_at_end;
              if (s == role.c) col.released_inner += model.kept_bytes(0, role.c, role.d, role.a, role.c);
              backward = &inner;
            }
            if (s == role.a) col.released_region = model.kept_bytes(0, role.a, role.b, -1, role.a);
          }
          col.b = backward->backward_delta;
          col.b_peak = backward->backward_peak;
          detail::GradState out = state;
          detail::ChainModel::hand_over(*backward, out);
          col.out_state = intern(s, out);
          const int depth = role.kind == kPlain ? 0 : role.kind == kChild ? 1 : 2;
          col.time_s = depth * model.stage_forward_s(s) + (blk > 1 ? model.edge_forward_s(s) : 0.0);
          p.columns.push_back(col);
        }
    }
  }
  const std::size_t m = p.columns.size();
  auto row = [&](const std::string& name, std::int64_t constant, auto coef) {
    Program::Row r{name, constant, std::vector<std::int64_t>(m)};
    for (std::size_t j = 0; j < m; ++j) r.coefficients[j] = coef(p.columns[j]);
    p.memory.push_back(std::move(r));
  };
  const std::int64_t after_loss_bytes =
      loss_forward.forward_delta + loss_forward.backward_prelude + loss_backward.backward_delta;
  const char* names = "FRIB";
  for (int u = 0; u < n; ++u) row(std::string("F") + std::to_string(u), 0, [&](const Column& c) { return coefficient(kF, u, c); });
  row("loss forward", loss_forward.forward_peak, [](const Column& c) { return c.f; });
  row("loss backward", loss_forward.forward_delta + loss_forward.backward_prelude + loss_backward.backward_peak,
      [](const Column& c) { return c.f; });
  for (int u = n - 1; u >= 0; --u)
    for (Event e : {kR, kI, kB})
      row(names[e] + std::to_string(u), after_loss_bytes, [&](const Column& c) { return coefficient(e, u, c); });
  row("end", after_loss_bytes, [](const Column& c) { return c.f + c.backward_total(); });
  // One column per stage.
  for (int s = 0; s < n; ++s) {
    Program::Equality e{{}, 1};
    for (std::size_t j = 0; j < m; ++j)
      if (p.columns[j].stage == s) e.terms.emplace_back(static_cast<int>(j), 1);
    p.equalities.push_back(std::move(e));
  }
  // Adjacent stages agree on what lies between them: the gradients in
  // flight, the region that continues across (if any) and the inner region
  // that does. One equality per such boundary node (flow conservation: the
  // columns form a path from the last stage to the first).
  for (int s = 0; s + 1 < n; ++s) {
    std::map<std::array<int, 5>, Program::Equality> node;
    for (std::size_t j = 0; j < m; ++j) {
      const Column& c = p.columns[j];
      const int sign = c.stage == s ? 1 : c.stage == s + 1 ? -1 : 0;
      if (sign == 0) continue;
      const bool region_across = c.role.kind != kPlain && c.role.a <= s && s + 1 <= c.role.b;
      const bool inner_across = c.role.kind == kInner && c.role.c <= s && s + 1 <= c.role.d;
      const std::array<int, 5> key{sign > 0 ? c.in_state : c.out_state, region_across ? c.role.a : -1,
                                   region_across ? c.role.b : -1, inner_across ? c.role.c : -1,
                                   inner_across ? c.role.d : -1};
      node[key].terms.emplace_back(static_cast<int>(j), sign);
    }
    for (auto& [key, e] : node) p.equalities.push_back(std::move(e));
  }
  return p;
}

Plan plan_of(const Program& p, const std::vector<int>& chosen, const CostGraph& g) {
  Plan plan = empty_plan(g.stages());
  std::map<std::pair<int, int>, Region> regions;
  std::map<std::pair<int, int>, std::map<std::pair<int, int>, Region>> inner;
  for (int j : chosen) {
    const Column& c = p.columns[static_cast<std::size_t>(j)];
    plan.edge_blocks[static_cast<std::size_t>(c.stage)] = c.blocks;
    if (c.role.kind == kPlain) continue;
    regions[{c.role.a, c.role.b}] = Region{c.role.a, c.role.b, {}};
    if (c.role.kind == kInner) inner[{c.role.a, c.role.b}][{c.role.c, c.role.d}] = Region{c.role.c, c.role.d, {}};
  }
  for (auto& [key, region] : regions) {
    for (auto& [k, r] : inner[key]) region.inner.push_back(r);
    plan.checkpoints.push_back(region);
  }
  return plan;
}

json program_json(const Program& p) {
  json cols = json::array();
  for (const Column& c : p.columns)
    cols.push_back({c.stage, c.role.kind, c.role.a, c.role.b, c.role.c, c.role.d, c.blocks, c.time_s});
  json rows = json::array();
  for (const auto& r : p.memory) {
    json index = json::array(), value = json::array();
    for (std::size_t j = 0; j < r.coefficients.size(); ++j)
      if (r.coefficients[j] != 0) {
        index.push_back(j);
        value.push_back(r.coefficients[j]);
      }
    rows.push_back({{"name", r.name}, {"constant", r.constant}, {"index", index}, {"value", value}});
  }
  json eqs = json::array();
  for (const auto& e : p.equalities) {
    json index = json::array(), value = json::array();
    for (auto [j, v] : e.terms) {
      index.push_back(j);
      value.push_back(v);
    }
    eqs.push_back({{"index", index}, {"value", value}, {"rhs", e.rhs}});
  }
  return {{"columns", cols}, {"memory_rows", rows}, {"equalities", eqs}};
}

// CPU seconds of this process (one thread): on a shared machine less
// disturbed by other load than wall time; HiGHS is timed the same way.
double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

int write(std::uint64_t seed, int index, bool nested, int max_stages, int budget_count, const std::string& out_path) {
  json instance = random_instance(seed, index, max_stages);
  instance["nested"] = nested;
  const CostGraph g = graph_of(instance);
  const Device device = load_device(kDevice);
  const SolverOptions options = options_of(nested);
  detail::ChainModel model(g, device);
  const Report none = simulate(g, device, device.memory_bytes, empty_plan(g.stages()));
  const std::int64_t least = minimum_memory(g, device, options).min_peak_bytes;
  std::mt19937_64 rng(seed * 7919u + static_cast<std::uint64_t>(index));
  // Below the least peak, at it, and at random between it and the peak
  // without checkpoints.
  std::vector<std::int64_t> budgets{least - 1, least};
  for (int i = 0; i < budget_count; ++i)
    budgets.push_back(least + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(none.peak_bytes - least + 1)));
  json answers = json::array();
  for (std::int64_t budget : budgets) {
    std::vector<double> times;
    Solution s;
    for (int rep = 0; rep < 5; ++rep) {
      const double t0 = cpu_seconds();
      s = solve(g, device, budget, options);
      times.push_back(cpu_seconds() - t0);
    }
    std::sort(times.begin(), times.end());
    const bool fits_as_written = s.report.peak_bytes <= budget;
    answers.push_back({{"budget", budget},
                       {"fits", fits_as_written},
                       {"peak_bytes", s.report.peak_bytes},
                       {"recompute_s", s.report.step_time_s - none.step_time_s},
                       {"plan", describe(s.plan, g.stages())},
                       {"solve_s", times[times.size() / 2]}});
  }
  const double t0 = cpu_seconds();
  const Program p = build_program(g, device, nested);
  const double build_s = cpu_seconds() - t0;
  instance["stages"] = g.stages().size();
  instance["static_bytes"] = model.static_bytes();
  instance["least_peak_bytes"] = least;
  instance["none_peak_bytes"] = none.peak_bytes;
  instance["none_step_time_s"] = none.step_time_s;
  instance["actmem"] = answers;
  instance["program"] = program_json(p);
  instance["program_build_s"] = build_s;
  std::ofstream(out_path) << instance.dump();
  return 0;
}

int check(const std::string& instance_path, const std::string& solution_path) {
  const json instance = json::parse(std::ifstream(instance_path));
  const json solution = json::parse(std::ifstream(solution_path));
  const bool nested = instance.at("nested").get<bool>();
  const CostGraph g = graph_of(instance);
  const Device device = load_device(kDevice);
  const Program p = build_program(g, device, nested);  // deterministic: the same columns and rows
  const std::int64_t static_bytes = instance.at("static_bytes").get<std::int64_t>();
  const double none_s = instance.at("none_step_time_s").get<double>();
  int failures = 0;
  const json& answers = instance.at("actmem");
  const json& results = solution.at("results");
  if (answers.size() != results.size()) {
    std::cerr << "ilp_instances: error: " << solution_path << ": " << results.size() << " results for "
              << answers.size() << " budgets\n";
    return 2;
  }
  for (std::size_t i = 0; i < answers.size(); ++i) {
    const json& a = answers[i];
    const json& r = results[i];
    const std::int64_t budget = a.at("budget").get<std::int64_t>();
    json line{{"instance", instance.at("index")}, {"budget", budget}, {"nested", nested},
              {"stages", instance.at("stages")}, {"columns", p.columns.size()}};
    std::vector<std::string> problems;
    const std::string status = r.at("status").get<std::string>();
    const bool actmem_fits = a.at("fits").get<bool>();
    line["actmem_fits"] = actmem_fits;
    line["ilp_status"] = status;
    if (status == "infeasible") {
      if (actmem_fits) problems.push_back("the ILP finds no plan within the budget, actmem does");
    } else if (status != "optimal") {
      problems.push_back("the ILP ended " + status);
    } else {
      const std::vector<int> chosen = r.at("chosen").get<std::vector<int>>();
      const Plan plan = plan_of(p, chosen, g);
      // The program's own peak for its choice, exactly, in integers.
      std::int64_t top = 0;
      for (const auto& row : p.memory) {
        std::int64_t sum = row.constant;
        for (int j : chosen) sum += row.coefficients[static_cast<std::size_t>(j)];
        top = std::max(top, sum);
      }
      double program_s = 0;
      for (int j : chosen) program_s += p.columns[static_cast<std::size_t>(j)].time_s;
      const Report sim = simulate(g, device, budget, plan);
      line["plan"] = describe(plan, g.stages());
      line["ilp_peak_bytes"] = static_bytes + top;
      line["simulated_peak_bytes"] = sim.peak_bytes;
      line["ilp_recompute_s"] = program_s;
      line["actmem_recompute_s"] = a.at("recompute_s");
      if (chosen.size() != g.stages().size()) problems.push_back("not one column per stage");
      if (static_bytes + top != sim.peak_bytes) problems.push_back("the program's peak differs from simulate()'s");
      if (sim.peak_bytes > budget) problems.push_back("the ILP's plan does not fit");
      const double sim_extra = sim.step_time_s - none_s;
      if (std::abs(sim_extra - program_s) > 1e-12 * sim.step_time_s)
        problems.push_back("the program's time differs from simulate()'s");
      if (!actmem_fits) {
        problems.push_back("the ILP finds a plan within the budget, actmem does not");
      } else {
        const double actmem_s = a.at("recompute_s").get<double>();
        if (std::abs(actmem_s - program_s) > 1e-9 * none_s) problems.push_back("the optima differ");
      }
    }
    line["agree"] = problems.empty();
    if (!problems.empty()) line["problems"] = problems;
    failures += problems.empty() ? 0 : 1;
    std::cout << line.dump() << "\n";
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 7 && args[0] == "write")
      return write(std::stoull(args[1]), std::stoi(args[2]), args[3] == "1", std::stoi(args[4]), std::stoi(args[5]),
                   args[6]);
    if (args.size() == 3 && args[0] == "check") return check(args[1], args[2]);
    std::cerr << "usage: ilp_instances write SEED INDEX NESTED(0|1) MAX_STAGES BUDGETS OUT.json\n"
                 "       ilp_instances check INSTANCE.json SOLUTION.json\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ilp_instances: error: " << e.what() << "\n";
    return 2;
  }
}

// The C++ side of the ILP agreement check (docs/solver.md "Independent
// optimum: an ILP"): writes one random small instance as a mixed-integer
// program, with actmem's own answers at the instance's budgets, and checks
// an ILP solution against simulate() and against those answers.
//
//   ilp_instances write SEED INDEX NESTED(0|1) MAX_STAGES ROLLOUT(1|2) BUDGETS OUT.json
//   ilp_instances check INSTANCE.json SOLUTION.json
//
// The program. One binary per *column*: in rollout step k, stage s runs in
// role (plain | plain child of region [a, b] | inside inner region [c, d]
// of region [a, b]) with B edge blocks, given the gradients in flight when
// its backward starts (a state at boundary s + 1), handing on a state at s;
// at rollout 2 also one per state for the first step's loss backward.
// Equalities: one column per stage; adjacent stages agree on the state
// between them and on the region (inner region) that continues across
// (flow conservation: the columns form a path); every step runs the same
// plan. Under JAX the decoder's edge-embedding backward may wait (J32,
// docs/cost-model.md): a state also says whether it waits and, inside a
// region, whether the region's recomputation runs it and whether a stage
// left of the boundary does (the leftmost that can does: its column takes
// the recomputation's effect with it run). Where blocked processor steps
// drop J31's copies (J35), a state also says which reader right of it is
// the last one blocked, and each column's effects are replayed under that.
// Where the encoder's complete branch runs after the decoder's segment
// (J36), a state also says how the first stage runs (in a region, plain in
// one block or in several), and the column ending the decoder's segment
// takes the branch's effect.
// Memory: for every event of the simulator's schedule (the forward of
// each stage, the losses, each recomputation, inner recomputation and
// backward, the end) the memory there is a linear sum over the columns,
// each column's coefficient depending only on its own step, role and
// effects and on where the event lies relative to its stage; each such sum
// plus the static bytes is at most the budget. Objective: the recompute
// time. The coefficients come from ChainModel's per-stage replays (shared
// with actmem's solver); the composition and the search are the program's
// and HiGHS's.
//
// `check` prints one JSON line per budget and exits 1 if any disagrees.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/simulator.h"
#include "actmem/solve/solver.h"
#include "solve/solver_model.h"
#include "solve/solver_search.h"

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
  int step = 0;   // rollout step
  int stage = 0;  // stage_count: the loss's backward of a step before the last
  Role role;
  std::int64_t blocks = 1;
  int in_state = 0, out_state = 0;   // at boundaries stage + 1 and stage
  int out_flags = 0;                 // the state at `stage`'s flags (kWaits ...)
  std::int64_t f = 0, f_peak = 0;    // original forward
  std::int64_t e = 0, e_peak = 0;    // its complete branch, run before its region's recomputation (J33)
  std::int64_t r = 0, r_peak = 0;    // the region's recomputation (kChild, kInner)
  std::int64_t ir = 0, ir_peak = 0;  // the inner region's recomputation (kInner)
  std::int64_t b = 0, b_peak = 0;    // backward
  std::int64_t h = 0, h_peak = 0;    // the first stage's complete branch, after the decoder's segment (J36)
  std::int64_t released_inner = 0;   // freed when the inner region's backward ends
  std::int64_t released_region = 0;  // freed when the region's backward ends
  double time_s = 0;                 // the stage's time is its mean over the steps
  bool loss() const { return role.kind == kPlain && blocks == 0; }
  // Everything the stage adds from the end of the loss's backward on.
  std::int64_t backward_total() const { return e + r + ir + b + h - released_inner - released_region; }
};

// The events of the schedule, per rollout step k and stage u: its forward
// (F), its complete branch run before its region's recomputation (E, J33),
// its recomputation in its region (R), its recomputation in its inner
// region (I), its backward (B), the moment after its backward and what
// that releases, where the first stage's complete branch runs if u's
// segment holds the decoder (H, J36); per step the loss's forward (LF) and
// backward (LB); and the end. Where a stage has no such execution (R of a
// plain stage), the event is the moment before its next execution, a real
// state of the schedule too. The order (the simulator's): every step's
// forward and loss, then the steps' backward passes from the last step to
// the first, each the loss's backward then the stages right to left.
enum Kind2 { kF, kE, kR, kI, kB, kH, kLF, kLB, kEnd };
struct Event {
  Kind2 kind = kF;
  int step = 0;
  int u = 0;
};

bool is_backward(Kind2 k) { return k == kE || k == kR || k == kI || k == kB || k == kH; }

// Memory at event `e` of step k, stage u that column `col` of its own step
// accounts for (without the loss's constants): what its stage's executions
// before that moment added, plus its own local peak when the event is its
// own execution.
std::int64_t within_step(Kind2 e, int u, const Column& col) {
  const int t = col.stage;
  if (e == kF) return t < u ? col.f : t == u ? col.f_peak : 0;
  // After u's backward: its column all done, the branch at its peak; the
  // others as at u's backward.
  if (e == kH && t == u) return col.f + col.backward_total() - col.h + col.h_peak;
  if (e == kH) e = kB;
  // Every backward-phase event comes after the whole forward pass.
  std::int64_t v = col.f;
  const Role& role = col.role;
  if (t == u) {
    if (e == kE) return v + col.e_peak;
    v += col.e;
    switch (e) {
      case kR: return v + (role.kind == kPlain ? 0 : col.r_peak);
      case kI: return v + (role.kind == kPlain ? 0 : role.kind == kChild ? col.r : col.r + col.ir_peak);
      default:
        return v + (role.kind == kPlain   ? col.b_peak
                    : role.kind == kChild ? col.r + col.b_peak
                                          : col.r + col.ir + col.b_peak);
    }
  }
  if (!role.in_region(u)) return v + (t > u ? col.backward_total() : 0);  // another segment
  // The same region: its complete branches left to right, then it
  // recomputes left to right, then runs backward right to left, an inner
  // region recomputing (saving) when its backward starts.
  if (e == kE) return v + (t < u ? col.e : 0);
  v += col.e;
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

// Memory at event `e` that column `col` (of any step) accounts for.
std::int64_t coefficient(const Event& e, const Column& col) {
  const int k = col.step;
  if (col.loss()) {
    // The loss's backward of step k (k < last): before the backward of
    // steps <= k.
    if (e.kind == kLB) return e.step == k ? col.b_peak : e.step < k ? col.b : 0;
    if (is_backward(e.kind)) return e.step <= k ? col.b : 0;
    return e.kind == kEnd ? col.b : 0;
  }
  switch (e.kind) {
    case kF: return k < e.step ? col.f : k == e.step ? within_step(kF, e.u, col) : 0;
    case kLF: return k <= e.step ? col.f : 0;
    case kLB: return col.f + (k > e.step ? col.backward_total() : 0);
    case kEnd: return col.f + col.backward_total();
    default: return k > e.step ? col.f + col.backward_total() : k < e.step ? col.f : within_step(e.kind, e.u, col);
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
json random_instance(std::uint64_t seed, int index, int max_stages, int rollout) {
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
  // At rollout > 1 under JAX the solver searches only step-checkpointed
  // plans (detail::chain_model_covers_unstepped_plans), which this program
  // does not model: those instances run PyTorch.
  const bool jax = pick(0, 1) != 0;
  run.framework = jax && rollout == 1 ? Framework::jax : Framework::pytorch;
  run.dtype = pick(0, 1) ? DType::bfloat16 : DType::float32;
  run.batch = pick(1, 2);
  run.rollout = rollout;
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

// A state's flags besides the gradients in flight (J32): the decoder's
// edge-embedding backward waits (inside a region: waited as the region's
// recomputation started); inside a region, that recomputation runs it, in
// its complete branches (J33) or after them, and a stage left of the
// boundary does (in that phase).
constexpr int kWaits = 1, kRegionRuns = 2, kRunsLeft = 4, kBranchRuns = 8;
// J36 (where ChainModel::has_top_level_ahead()): the first stage runs
// plain in one block (kFirstPlain) or in several (kFirstPlainBlocked), its
// complete branch then differentiated after the segment that holds the
// decoder, whose column takes its effect (chosen there, then carried; the
// first stage's column must agree); neither: in a region.
constexpr int kFirstPlain = 16, kFirstPlainBlocked = 32, kFirstStageBits = kFirstPlain | kFirstPlainBlocked;
// And above these bits, J35's condition as seen from the boundary: 1 + the
// last stage of ChainModel::condition_stages() right of it that runs in
// blocks (0: none does). A stage's effects are the model's under it (the
// copies its LayerNorms drop follow from the plan's last blocked reader,
// which, if any lies right of the stage, is that one); a blocked reader
// with none to its right sets it.
constexpr int kConditionShift = 6;

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
  const int steps = model.steps();
  if (steps > 2) throw std::runtime_error("rollout > 2 is not modelled here");
  const auto edges = edges_per_stage(g.chain());
  Program p;
  // States (gradients in flight, the full map) per step and boundary, by
  // identity; boundary n of step k is after its loss's backward.
  const auto slot = [&](int k, int boundary) { return static_cast<std::size_t>(k * (n + 1) + boundary); };
  using State = std::pair<detail::GradState, int>;  // the gradients in flight, the flags
  std::vector<std::map<State, int>> states(slot(steps, 0));
  std::vector<std::vector<const State*>> state_list(slot(steps, 0));
  auto intern = [&](int k, int boundary, const detail::GradState& s, int flags) {
    auto& m = states[slot(k, boundary)];
    auto [it, fresh] = m.emplace(State{s, flags}, static_cast<int>(m.size()));
    if (fresh) state_list[slot(k, boundary)].push_back(&it->first);
    return it->second;
  };
  // The losses: forward and prelude fixed; the last step's backward too
  // (nothing in flight before it); an earlier step's backward depends on
  // the gradients the later step hands it: a column per state.
  std::int64_t forward_losses = 0, preludes = 0;
  std::vector<std::int64_t> forward_losses_before(static_cast<std::size_t>(steps + 1), 0);
  for (int k = 0; k < steps; ++k) {
    const detail::Effect& l = model.loss(model.class_of(k));
    forward_losses_before[static_cast<std::size_t>(k)] = forward_losses;
    forward_losses += l.forward_delta;
    preludes += l.backward_prelude;
  }
  const int last = steps - 1;
  const detail::Effect& last_loss = model.loss(model.class_of(last), model.signature(model.class_of(last), n, {}));
  {
    detail::GradState after;
    detail::ChainModel::hand_over(last_loss, after);
    intern(last, n, after, 0);
  }
  for (int k = last; k >= 0; --k) {
    const int cls = model.class_of(k);
    if (k < last) {
      const auto& incoming = state_list[slot(k + 1, 0)];
      for (std::size_t gi = 0; gi < incoming.size(); ++gi) {
        const detail::GradState state = incoming[gi]->first;
        const detail::Effect& l = model.loss(cls, model.signature(cls, n, state));
        Column col;
        col.step = k;
        col.stage = n;
        col.blocks = 0;  // loss()
        col.in_state = static_cast<int>(gi);
        col.b = l.backward_delta;
        col.b_peak = l.backward_peak;
        detail::GradState out = state;
        detail::ChainModel::hand_over(l, out);
        col.out_state = intern(k, n, out, incoming[gi]->second);
        p.columns.push_back(col);
      }
    }
    for (int s = n - 1; s >= 0; --s) {
      std::vector<std::int64_t> blocks{1};
      if (edges[static_cast<std::size_t>(s)] > 0)
        for (std::int64_t b : kBlockChoices)
          if (b > 1 && b <= edges[static_cast<std::size_t>(s)]) blocks.push_back(b);
      const std::vector<Role> roles = roles_of(s, n, nested);
      for (std::size_t gi = 0; gi < state_list[slot(k, s + 1)].size(); ++gi) {
        const detail::GradState state = state_list[slot(k, s + 1)][gi]->first;
        const int flags = state_list[slot(k, s + 1)][gi]->second;
        const std::vector<std::int64_t> in = model.signature(cls, s, state);
        const bool waits = flags & kWaits;
        const int last_blocked = (flags >> kConditionShift) - 1;
        model.set_condition(last_blocked);
        const bool reader = std::binary_search(model.condition_stages().begin(), model.condition_stages().end(), s);
        // J36: chosen by the decoder's stage, carried, checked by the first.
        std::vector<int> first_choices{flags & kFirstStageBits};
        if (s == n - 1 && model.has_top_level_ahead()) first_choices = {0, kFirstPlain, kFirstPlainBlocked};
        for (const Role& role : roles)
          for (std::int64_t blk : blocks)
            for (const int first : first_choices) {
              if (s == 0 && model.has_top_level_ahead() &&
                  first != (role.kind != kPlain ? 0
                            : blk > 1           ? kFirstPlainBlocked
                                                : kFirstPlain))
                continue;
              // What the state carries beyond J32's flags: J35's and J36's conditions.
              const int carried_bits =
                  ((last_blocked < 0 && reader && blk > 1 ? s + 1 : last_blocked + 1) << kConditionShift) | first;
              // The column that ends the decoder's segment takes the branch.
              const bool ends_decoder = role.kind == kPlain ? s == n - 1 : role.b == n - 1 && s == role.a;
              const auto branch = [&](const detail::GradState& out) {
                if (!ends_decoder || first == 0) return detail::Piece{};
                std::int64_t blocks0 = 1;
                if (first == kFirstPlainBlocked)
                  for (std::int64_t b : kBlockChoices)
                    if (b > 1 && b <= edges[0]) {
                      blocks0 = b;
                      break;
                    }
                return model.top_level_ahead_effect(cls, blocks0, out);
              };
              // Inside a region (a boundary right of s that is not its end)
              // the flags are the region's; a stage starting one needs none.
              const bool enters = role.kind == kPlain || s == role.b;
              if (enters && (flags & (kRegionRuns | kRunsLeft | kBranchRuns))) continue;
              Column col;
              col.step = k;
              col.stage = s;
              col.role = role;
              col.blocks = blk;
              col.in_state = static_cast<int>(gi);
              const int depth = role.kind == kPlain ? 0 : role.kind == kChild ? 1 : 2;
              col.time_s = depth * model.stage_forward_s(s) + (blk > 1 ? model.edge_forward_s(s) : 0.0);
              if (role.kind == kPlain) {
                const detail::Effect& e = model.plain(cls, s, blk, in, waits);
                col.f = e.forward_delta;
                col.f_peak = e.forward_peak;
                col.b = e.backward_delta;
                col.b_peak = e.backward_peak;
                detail::GradState out = state;
                detail::ChainModel::hand_over(e, out);
                const detail::Piece h = branch(out);
                col.h = h.delta;
                col.h_peak = h.peak;
                col.out_flags = ((waits && !e.backward_ran_pending) || e.leaves_pending ? kWaits : 0) | carried_bits;
                col.out_state = intern(k, s, out, col.out_flags);
                p.columns.push_back(col);
                continue;
              }
              const detail::Effect& fw = model.region_forward(cls, s, blk, role.a);
              col.f = fw.forward_delta;
              col.f_peak = fw.forward_peak;
              const detail::Effect& rc = role.kind == kChild
                                             ? model.recompute_plain(cls, s, blk, role.a, role.b, in)
                                             : model.recompute_in_inner(cls, s, blk, role.a, role.b, role.c);
              const detail::Effect* pending = nullptr;  // the recomputation with the backward waiting
              if (waits)
                pending = role.kind == kChild ? &model.recompute_plain(cls, s, blk, role.a, role.b, in, true)
                                              : &model.recompute_in_inner(cls, s, blk, role.a, role.b, role.c, true);
              const detail::Effect* backward = &rc;
              if (role.kind == kInner) {
                const detail::Effect& inner = model.inner_recompute(cls, s, blk, role.c, role.d, in);
                col.ir = inner.forward_delta;
                col.ir_peak = inner.forward_peak;
                col.released_inner = inner.released_at_end;
                if (s == role.c)  // and what J37 lets go at its end of the region's
                  col.released_inner += model.kept_bytes(cls, role.c, role.d, role.a, role.c) +
                                        model.released_before_end(cls, role.c, role.d, -1, role.a);
                backward = &inner;
              }
              if (s == role.a)  // less what J37 lets go before
                col.released_region = model.kept_bytes(cls, role.a, role.b, -1, role.a) -
                                      model.released_before_end(cls, role.a, role.b, -1, role.a);
              col.b = backward->backward_delta;
              col.b_peak = backward->backward_peak;
              detail::GradState out = state;
              detail::ChainModel::hand_over(*backward, out);
              const detail::Piece h = branch(out);
              col.h = h.delta;
              col.h_peak = h.peak;
              // The flags it hands on: whether the region's recomputation
              // runs the waiting backward, and whether in its complete
              // branches, which all run first (chosen at the region's end,
              // then carried), and whether a stage left of s does (chosen
              // where s could run it, else carried). s runs it when it can
              // in that phase and none to its left does; no branch can where
              // the rest runs it.
              for (int region_runs : {0, 1})
                for (int branch_runs : {0, 1}) {
                  if (enters ? (region_runs && !waits) || (branch_runs && !region_runs)
                             : region_runs != ((flags & kRegionRuns) ? 1 : 0) ||
                                   branch_runs != ((flags & kBranchRuns) ? 1 : 0))
                    continue;
                  if (!branch_runs && pending && pending->ahead_ran_pending) continue;
                  const bool runs = pending && (branch_runs ? pending->ahead_ran_pending : pending->ran_pending);
                  const bool runs_left_of_next = enters ? region_runs : (flags & kRunsLeft);
                  for (int runs_left : {0, 1}) {
                    if (runs ? !runs_left_of_next : runs_left != static_cast<int>(runs_left_of_next)) continue;
                    if (s == role.a && runs_left) continue;
                    const bool here = runs && !runs_left;
                    const detail::Effect& r = here ? *pending : rc;
                    Column x = col;
                    x.r = (here && !branch_runs ? r : rc).forward_delta;
                    x.r_peak = (here && !branch_runs ? r : rc).forward_peak;
                    x.e = (here && branch_runs ? r : rc).ahead_delta;
                    x.e_peak = (here && branch_runs ? r : rc).ahead_peak;
                    x.out_flags = (s == role.a ? (waits && !region_runs ? kWaits : 0)
                                               : (waits ? kWaits : 0) | (region_runs ? kRegionRuns : 0) |
                                                     (branch_runs ? kBranchRuns : 0) | (runs_left ? kRunsLeft : 0)) |
                                  carried_bits;
                    x.out_state = intern(k, s, out, x.out_flags);
                    p.columns.push_back(x);
                  }
                }
            }
      }
    }
  }
  model.set_condition(-1);
  const std::size_t m = p.columns.size();
  auto row = [&](const std::string& name, std::int64_t constant, const Event& e) {
    Program::Row r{name, constant, std::vector<std::int64_t>(m)};
    for (std::size_t j = 0; j < m; ++j) r.coefficients[j] = coefficient(e, p.columns[j]);
    p.memory.push_back(std::move(r));
  };
  const std::string names[] = {"F", "E", "R", "I", "B", "H"};
  for (int k = 0; k < steps; ++k) {
    const std::string step = steps > 1 ? "step " + std::to_string(k) + " " : "";
    const std::int64_t before = forward_losses_before[static_cast<std::size_t>(k)];
    for (int u = 0; u < n; ++u) row(step + "F" + std::to_string(u), before, {kF, k, u});
    row(step + "loss forward", before + model.loss(model.class_of(k)).forward_peak, {kLF, k, 0});
  }
  const std::int64_t after_forward = forward_losses + preludes;
  for (int k = last; k >= 0; --k) {
    const std::string step = steps > 1 ? "step " + std::to_string(k) + " " : "";
    // The last step's loss backward is a constant; earlier ones are columns.
    row(step + "loss backward", after_forward + (k == last ? last_loss.backward_peak : last_loss.backward_delta),
        {kLB, k, 0});
    for (int u = n - 1; u >= 0; --u)
      for (Kind2 e : {kE, kR, kI, kB, kH})
        row(step + names[e] + std::to_string(u), after_forward + last_loss.backward_delta, {e, k, u});
  }
  row("end", after_forward + last_loss.backward_delta, {kEnd, 0, 0});
  // J32: a backward pass that ends with the edge-embedding backward still
  // waiting runs it then (the first stage's column of the first step says).
  row("end, the edge embedding's backward", after_forward + last_loss.backward_delta, {kEnd, 0, 0});
  for (std::size_t j = 0; j < m; ++j) {
    const Column& c = p.columns[j];
    if (c.step != 0 || c.stage != 0 || !(c.out_flags & kWaits)) continue;
    p.memory[p.memory.size() - 2].coefficients[j] += model.pending_effect().delta;
    p.memory[p.memory.size() - 1].coefficients[j] += model.pending_effect().peak;
  }
  // One column per stage and step (and per earlier step's loss).
  for (int k = 0; k < steps; ++k)
    for (int s = 0; s <= (k < last ? n : n - 1); ++s) {
      Program::Equality e{{}, 1};
      for (std::size_t j = 0; j < m; ++j)
        if (p.columns[j].step == k && p.columns[j].stage == s) e.terms.emplace_back(static_cast<int>(j), 1);
      p.equalities.push_back(std::move(e));
    }
  // Adjacent stages agree on what lies between them: the gradients in
  // flight, the region that continues across (if any) and the inner region
  // that does. One equality per such boundary node (flow conservation: the
  // columns form a path from the last stage to the first, through the
  // loss's backward of an earlier step).
  for (int k = 0; k < steps; ++k)
    for (int s = 0; s + 1 < n + (k < last ? 1 : 0); ++s) {
      std::map<std::array<int, 5>, Program::Equality> node;
      for (std::size_t j = 0; j < m; ++j) {
        const Column& c = p.columns[j];
        const int sign = c.step != k ? 0 : c.stage == s ? 1 : c.stage == s + 1 ? -1 : 0;
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
  // Across steps: step k's loss takes the state step k + 1's first stage
  // hands on.
  for (int k = 0; k < last; ++k) {
    std::map<int, Program::Equality> node;
    for (std::size_t j = 0; j < m; ++j) {
      const Column& c = p.columns[j];
      if (c.step == k && c.stage == n) node[c.in_state].terms.emplace_back(static_cast<int>(j), 1);
      if (c.step == k + 1 && c.stage == 0) node[c.out_state].terms.emplace_back(static_cast<int>(j), -1);
    }
    for (auto& [key, e] : node) p.equalities.push_back(std::move(e));
  }
  // Every step runs the same plan: the same role and blocks per stage.
  for (int k = 1; k < steps; ++k) {
    std::map<std::array<std::int64_t, 7>, Program::Equality> same;
    for (std::size_t j = 0; j < m; ++j) {
      const Column& c = p.columns[j];
      if ((c.step != 0 && c.step != k) || c.loss()) continue;
      same[{c.stage, c.role.kind, c.role.a, c.role.b, c.role.c, c.role.d, c.blocks}].terms.emplace_back(
          static_cast<int>(j), c.step == 0 ? 1 : -1);
    }
    for (auto& [key, e] : same) p.equalities.push_back(std::move(e));
  }
  return p;
}

Plan plan_of(const Program& p, const std::vector<int>& chosen, const CostGraph& g) {
  Plan plan = empty_plan(g.stages());
  std::map<std::pair<int, int>, Region> regions;
  std::map<std::pair<int, int>, std::map<std::pair<int, int>, Region>> inner;
  for (int j : chosen) {
    const Column& c = p.columns[static_cast<std::size_t>(j)];
    if (c.loss() || c.step != 0) continue;  // every step's choice is the first's (an equality)
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

// The columns a plan chooses: per step from the last stage to the first,
// the column of its role and blocks from the state the path is in (where
// the flags leave a choice, J32 or J36, the one that reaches the first
// stage);
// ending in a -1 entry if the program has no such path.
std::vector<int> path_of(const Program& p, const Plan& plan, int steps, int n) {
  auto role_of = [&](int s) {
    for (const Region& r : plan.checkpoints)
      if (r.from <= s && s <= r.to) {
        for (const Region& in : r.inner)
          if (in.from <= s && s <= in.to) return Role{kInner, r.from, r.to, in.from, in.to};
        return Role{kChild, r.from, r.to, -1, -1};
      }
    return Role{};
  };
  // The positions of the path: (step, stage) from the last step's last stage.
  std::vector<std::pair<int, int>> at;
  for (int k = steps - 1; k >= 0; --k)
    for (int s = k < steps - 1 ? n : n - 1; s >= 0; --s) at.emplace_back(k, s);
  std::vector<int> out;
  const auto extend = [&](const auto& self, std::size_t i, int state) -> bool {
    if (i == at.size()) return true;
    const auto [k, s] = at[i];
    for (std::size_t j = 0; j < p.columns.size(); ++j) {
      const Column& c = p.columns[j];
      if (c.step != k || c.stage != s || c.in_state != state) continue;
      if (s < n) {
        const Role r = role_of(s);
        if (c.blocks != plan.edge_blocks[static_cast<std::size_t>(s)] || c.role.kind != r.kind || c.role.a != r.a ||
            c.role.b != r.b || c.role.c != r.c || c.role.d != r.d)
          continue;
      }
      out.push_back(static_cast<int>(j));
      if (self(self, i + 1, c.out_state)) return true;
      out.pop_back();
    }
    return false;
  };
  if (!extend(extend, 0, 0)) out.push_back(-1);  // the only state after the last step's loss: 0
  return out;
}

// The program's peak for a set of columns, in integer bytes (static
// bytes included).
std::int64_t program_peak(const Program& p, const std::vector<int>& chosen, std::int64_t static_bytes) {
  std::int64_t top = 0;
  for (const auto& row : p.memory) {
    std::int64_t sum = row.constant;
    for (int j : chosen) sum += row.coefficients[static_cast<std::size_t>(j)];
    top = std::max(top, sum);
  }
  return static_bytes + top;
}

json program_json(const Program& p) {
  json cols = json::array();
  for (const Column& c : p.columns)
    cols.push_back({c.stage, c.role.kind, c.role.a, c.role.b, c.role.c, c.role.d, c.blocks, c.time_s, c.step});
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

// actmem's answer at one budget, and its CPU time (median of 5 runs).
// Rollout 1: solve(). Rollout 2: the dynamic program's frontier
// (search_frontier, what solve() searches), since solve() adds plans that
// checkpoint each rollout step whole, which this program does not model.
json actmem_answer(const CostGraph& g, const Device& device, bool nested, std::int64_t budget, double none_s) {
  const SolverOptions options = options_of(nested);
  std::vector<double> times;
  json answer;
  for (int rep = 0; rep < 5; ++rep) {
    const double t0 = cpu_seconds();
    if (g.run().rollout == 1) {
      const Solution s = solve(g, device, budget, options);
      times.push_back(cpu_seconds() - t0);
      answer = {{"fits", s.report.peak_bytes <= budget},  // as written (not XLA's own rematerialisation)
                {"peak_bytes", s.report.peak_bytes},
                {"recompute_s", s.report.step_time_s - none_s},
                {"plan", describe(s.plan, g.stages())},
                {"plan_json", plan_to_json(s.plan, g.stages())}};
    } else {
      detail::ChainModel model(g, device);
      detail::SearchSpace space;
      space.block_choices = kBlockChoices;
      space.nested_regions = nested;
      const std::vector<detail::Candidate> frontier = detail::search_frontier(model, space);
      const detail::Candidate* best = nullptr;
      for (const detail::Candidate& c : frontier)
        if (c.peak_bytes <= budget && (!best || c.recompute_s < best->recompute_s)) best = &c;
      times.push_back(cpu_seconds() - t0);
      answer = {{"fits", best != nullptr}};
      if (best) {
        const Report r = simulate(g, device, budget, best->plan);
        answer.update({{"peak_bytes", best->peak_bytes},
                       {"simulated_peak_bytes", r.peak_bytes},
                       {"recompute_s", best->recompute_s},
                       {"simulated_recompute_s", r.step_time_s - none_s},
                       {"plan", describe(best->plan, g.stages())},
                       {"plan_json", plan_to_json(best->plan, g.stages())}});
      }
    }
  }
  std::sort(times.begin(), times.end());
  answer["budget"] = budget;
  answer["solve_s"] = times[times.size() / 2];
  return answer;
}

int write(std::uint64_t seed, int index, bool nested, int max_stages, int rollout, int budget_count,
          const std::string& out_path) {
  json instance = random_instance(seed, index, max_stages, rollout);
  instance["nested"] = nested;
  const CostGraph g = graph_of(instance);
  const Device device = load_device(kDevice);
  detail::ChainModel model(g, device);
  const Report none = simulate(g, device, device.memory_bytes, empty_plan(g.stages()));
  std::int64_t least = 0;
  if (rollout == 1) {
    least = minimum_memory(g, device, options_of(nested)).min_peak_bytes;
  } else {
    detail::SearchSpace space;
    space.block_choices = kBlockChoices;
    space.nested_regions = nested;
    least = detail::search_frontier(model, space).front().peak_bytes;
  }
  std::mt19937_64 rng(seed * 7919u + static_cast<std::uint64_t>(index));
  // Below the least peak, at it, and at random between it and the peak
  // without checkpoints.
  std::vector<std::int64_t> budgets{least - 1, least};
  for (int i = 0; i < budget_count; ++i)
    budgets.push_back(least +
                      static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(none.peak_bytes - least + 1)));
  json answers = json::array();
  for (std::int64_t budget : budgets) answers.push_back(actmem_answer(g, device, nested, budget, none.step_time_s));
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
    json line{{"instance", instance.at("index")},
              {"budget", budget},
              {"nested", nested},
              {"rollout", g.run().rollout},
              {"stages", instance.at("stages")},
              {"columns", p.columns.size()}};
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
      const std::int64_t top = program_peak(p, chosen, static_bytes) - static_bytes;
      double program_s = 0;
      for (int j : chosen) program_s += p.columns[static_cast<std::size_t>(j)].time_s;
      const Report sim = simulate(g, device, budget, plan);
      line["plan"] = describe(plan, g.stages());
      line["ilp_peak_bytes"] = static_bytes + top;
      line["simulated_peak_bytes"] = sim.peak_bytes;
      line["ilp_recompute_s"] = program_s;
      line["actmem_recompute_s"] = a.at("recompute_s");
      const std::size_t steps = static_cast<std::size_t>(g.run().rollout);
      if (chosen.size() != steps * g.stages().size() + steps - 1) problems.push_back("not one column per stage");
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
    // actmem's plan as a path of the program: the program's peak for it is
    // simulate()'s, and it is within the budget (else the ILP could have
    // missed it).
    if (actmem_fits) {
      const Plan plan = plan_from_json(a.at("plan_json"), g.chain(), "actmem's plan");
      const std::vector<int> path =
          path_of(p, plan, static_cast<int>(g.run().rollout), static_cast<int>(g.stages().size()));
      const Report sim = simulate(g, device, budget, plan);
      line["actmem_simulated_peak_bytes"] = sim.peak_bytes;
      if (std::find(path.begin(), path.end(), -1) != path.end()) {
        problems.push_back("actmem's plan is no path of the program");
      } else {
        const std::int64_t peak = program_peak(p, path, static_bytes);
        line["actmem_plan_program_peak_bytes"] = peak;
        line["actmem_path"] = path;
        if (peak != sim.peak_bytes)
          problems.push_back("the program's peak for actmem's plan differs from simulate()'s");
      }
      if (sim.peak_bytes > budget) problems.push_back("actmem's plan does not fit when simulated");
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
    if (args.size() == 8 && args[0] == "write")
      return write(std::stoull(args[1]), std::stoi(args[2]), args[3] == "1", std::stoi(args[4]), std::stoi(args[5]),
                   std::stoi(args[6]), args[7]);
    if (args.size() == 3 && args[0] == "check") return check(args[1], args[2]);
    std::cerr << "usage: ilp_instances write SEED INDEX NESTED(0|1) MAX_STAGES ROLLOUT(1|2) BUDGETS OUT.json\n"
                 "       ilp_instances check INSTANCE.json SOLUTION.json\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "ilp_instances: error: " << e.what() << "\n";
    return 2;
  }
}

// The cost graph's lifetimes and cut points (planner/src/cut_points.h):
// hand-built DAGs where the answer is known, and GraphCast in every preset,
// framework and implementation, at rollout 1 and 3.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <set>
#include <span>
#include <string>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "cost/cut_points.h"
#include "test_models.h"

using namespace actmem;
using detail::cut_points;

namespace {

// The tiny model of implementation `c` at rollout 3 (first, middle and last
// steps all present).
CostGraph tiny_rollout_3(const testing::ImplementationCase& c, Framework framework) {
  RunOptions run;
  run.framework = framework;
  run.rollout = 3;
  return CostGraph::build(testing::tiny_model(2, c), run);
}

// Op i makes tensor "t<i>" from the tensors of the ops in reads[i] (none:
// from the model input x), in stage stage_of[i] (default 0) of one stage per
// name in `stages`.
CostGraph dag(const std::vector<std::vector<int>>& reads, const std::vector<int>& stage_of = {},
              std::vector<std::string> stages = {"all"}) {
  std::vector<Stage> chain;
  for (std::string& name : stages) chain.push_back({std::move(name)});
  CostGraphBuilder b(testing::tiny_model(1), RunOptions{}, std::move(chain));
  const TensorId x = b.add_tensor({"x", 4, 4, 4, TensorRole::input, false});
  std::vector<TensorId> made;
  for (std::size_t i = 0; i < reads.size(); ++i) {
    Op op;
    op.kind = OpKind::add;
    op.name = fmt::format("op{}", i);
    op.stage = stage_of.empty() ? 0 : stage_of[i];
    for (int r : reads[i]) op.inputs.push_back(made[static_cast<std::size_t>(r)]);
    if (op.inputs.empty()) op.inputs = {x};
    made.push_back(b.add_tensor({fmt::format("t{}", i), 4, 4, 4, TensorRole::activation, true}));
    op.outputs = {made.back()};
    b.add_op(op);
  }
  return b.finish();
}

// GraphCast's stage boundaries that are no cut points, as the builder makes
// them: mesh_edge_embed's end in every step (it reads only inputs and
// parameters, so its output joins what crosses its start), and JAX's loss
// stage in every step that reads the previous step's carry and makes one
// that is read (the carry crosses the whole step; the step's end, where
// only the next carry crosses, is narrower).
bool expected_non_cut(const CostGraph& g, int boundary) {
  const Op& before = g.ops()[static_cast<std::size_t>(boundary) - 1];
  const Op& after = g.ops()[static_cast<std::size_t>(boundary)];
  if (g.stage_name(before.stage) == "mesh_edge_embed" && g.stage_name(after.stage) == "processor.0") return true;
  const int loss = static_cast<int>(g.stages().size());
  return g.run().framework == Framework::jax && after.stage == loss && before.stage == loss - 1 && after.step > 0 &&
         after.step + 1 < static_cast<int>(g.run().rollout);
}

}  // namespace

TEST_SUITE("cut points") {
  TEST_CASE("cut points: lifetimes are read off the DAG's edges, holds and inputs aside") {
    // op0: x -> t0; op1: t0, t0 -> t1 (reads t0 twice); op2: t0 -> t2, holding t1.
    CostGraphBuilder b(testing::tiny_model(1), RunOptions{}, {{"all"}});
    const TensorId x = b.add_tensor({"x", 4, 4, 4, TensorRole::input, false});
    std::vector<TensorId> t;
    for (int i = 0; i < 3; ++i) t.push_back(b.add_tensor({"t", 4, 4, 4, TensorRole::activation, true}));
    const std::vector<std::vector<TensorId>> inputs{{x}, {t[0], t[0]}, {t[0]}};
    for (std::size_t i = 0; i < 3; ++i) {
      Op op;
      op.name = fmt::format("op{}", i);
      op.inputs = inputs[i];
      op.outputs = {t[i]};
      b.add_op(op);
    }
    b.hold_until(2, t[1]);
    const CostGraph g = b.finish();
    CHECK(g.lifetime(x).producer == -1);
    CHECK(g.lifetime(x).last_use == -1);
    CHECK(g.lifetime(x).uses == 0);
    CHECK(g.lifetime(t[0]).producer == 0);
    CHECK(g.lifetime(t[0]).last_use == 2);
    CHECK(g.lifetime(t[0]).uses == 3);
    CHECK(g.lifetime(t[1]).producer == 1);
    CHECK(g.lifetime(t[1]).last_use == -1);  // only held: no edge
    CHECK(g.lifetime(t[1]).uses == 0);
    CHECK(g.lifetime(t[2]).last_use == -1);
  }

  TEST_CASE("cut points: GraphCast's lifetimes agree with its producers and consumers") {
    for (const testing::ImplementationCase& c : testing::kImplementationCases)
      for (Framework framework : {Framework::pytorch, Framework::jax}) {
        CAPTURE(c.name);
        const CostGraph g = tiny_rollout_3(c, framework);
        for (std::size_t t = 0; t < g.tensors().size(); ++t) {
          const auto id = static_cast<TensorId>(t);
          CHECK(g.lifetime(id).producer == g.producer(id));
          // Inputs and parameters are no edges of the DAG: no uses.
          const auto consumers = g.producer(id) < 0 ? std::span<const OpId>{} : g.consumers(id);
          CHECK(g.lifetime(id).uses == static_cast<int>(consumers.size()));
          CHECK(g.lifetime(id).last_use == (consumers.empty() ? -1 : consumers.back()));
        }
      }
  }

  TEST_CASE("cut points: in a chain every inner boundary is a cut") {
    const CostGraph g = dag({{}, {0}, {1}, {2}, {3}});
    CHECK(detail::crossing_widths(g) == std::vector<int>{0, 1, 1, 1, 1, 0});
    CHECK(cut_points(g) == std::vector<int>{1, 2, 3, 4});
    CHECK(detail::crossing_set(g, 2) == std::vector<TensorId>{2});  // t1 (x is tensor 0)
  }

  TEST_CASE("cut points: a skip connection's span holds no cut, however long") {
    // a -> b -> c -> d with a -> c: after b, a and b cross.
    const CostGraph short_skip = dag({{}, {0}, {0, 1}, {2}});
    CHECK(detail::crossing_widths(short_skip) == std::vector<int>{0, 1, 2, 1, 0});
    CHECK(cut_points(short_skip) == std::vector<int>{1, 3});
    // a -> b -> b2 -> b3 -> c -> d with a -> c: a plateau of 2 between 1s.
    const CostGraph long_skip = dag({{}, {0}, {1}, {2}, {0, 3}, {4}});
    CHECK(cut_points(long_skip) == std::vector<int>{1, 5});
    // A diamond a -> {b, c} -> d, then e: no cut between the branches.
    const CostGraph diamond = dag({{}, {0}, {0}, {1, 2}, {3}});
    CHECK(detail::crossing_widths(diamond) == std::vector<int>{0, 1, 2, 2, 1, 0});
    CHECK(cut_points(diamond) == std::vector<int>{1, 4});
    // A fan-in: a, b, c made from the input alone, d reads all three, then
    // e: the widths rise 1, 2, 3 and fall to 1, so only a's end and d's.
    const CostGraph fan_in = dag({{}, {}, {}, {0, 1, 2}, {3}});
    CHECK(detail::crossing_widths(fan_in) == std::vector<int>{0, 1, 2, 3, 1, 0});
    CHECK(cut_points(fan_in) == std::vector<int>{1, 4});
    // Two overlapping skips, a -> c and b -> d, in a chain a..e: only the ends.
    const CostGraph overlapping = dag({{}, {0}, {0, 1}, {1, 2}, {3}});
    CHECK(cut_points(overlapping) == std::vector<int>{1, 4});
  }

  TEST_CASE("cut points: the chain derived from them splits the ops at each cut") {
    CHECK(detail::chain_from_cut_points(6, std::vector<int>{1, 5}) == std::vector<int>{0, 1, 1, 1, 1, 2});
    CHECK(detail::chain_from_cut_points(3, std::vector<int>{}) == std::vector<int>{0, 0, 0});
    const CostGraph g = dag({{}, {0}, {1}, {2}});
    CHECK(detail::chain_from_cut_points(g.ops().size(), cut_points(g)) == std::vector<int>{0, 1, 2, 3});
  }

  TEST_CASE("cut points: a stage boundary inside a skip is refused as a builder bug") {
    // Stages {a, b} and {b2, b3, c, d} of a -> b -> b2 -> b3 -> c -> d with a -> c.
    CHECK_THROWS_WITH_AS(dag({{}, {0}, {1}, {2}, {0, 3}, {4}}, {0, 0, 1, 1, 1, 1}, {"s0", "s1"}),
                         doctest::Contains("stage boundary before op op2 is no cut point"), std::logic_error);
    // A branch stage is accepted: {a, b}, the branch {c} made from the
    // input alone, {d, e} (d reads b and c).
    CHECK_NOTHROW(dag({{}, {0}, {}, {1, 2}, {3}}, {0, 0, 1, 2, 2}, {"s0", "branch", "s2"}));
    // Not a branch: {a, b}, {c} reading b, {d} reading a and c, {e}.
    CHECK_THROWS_AS(dag({{}, {0}, {1}, {0, 2}, {3}}, {0, 0, 1, 2, 3}, {"s0", "s1", "s2", "s3"}), std::logic_error);
    // A join stage is accepted: {a}, {b, c}, then {d}, the last use of a
    // and c, then {e}.
    CHECK_NOTHROW(dag({{}, {0}, {1}, {0, 2}, {3}}, {0, 1, 1, 2, 3}, {"s0", "s1", "join", "s3"}));
  }

  TEST_CASE("cut points: GraphCast's stage boundaries are cut points but for mesh_edge_embed's and JAX's loss") {
    for (const char* preset : {"graphcast", "graphcast-small", "graphcast-operational"})
      for (const testing::ImplementationCase& c : testing::kImplementationCases)
        for (Framework framework : {Framework::pytorch, Framework::jax})
          for (int rollout : {1, 3}) {
            CAPTURE(preset);
            CAPTURE(c.name);
            CAPTURE(rollout);
            ModelDescription m = load_model(preset);
            m.implementation = c.implementation;
            m.concat_trick = c.concat_trick;
            RunOptions run;
            run.framework = framework;
            run.rollout = rollout;
            const CostGraph g = CostGraph::build(m, run);
            const std::vector<int> cuts = cut_points(g);
            const std::set<int> cut_set(cuts.begin(), cuts.end());
            int non_cut = 0;
            for (int b : detail::stage_boundaries(g)) {
              CAPTURE(g.ops()[static_cast<std::size_t>(b)].name);
              CHECK(cut_set.count(b) == (expected_non_cut(g, b) ? 0u : 1u));
              non_cut += expected_non_cut(g, b) ? 1 : 0;
            }
            const int middle_steps = framework == Framework::jax ? std::max(0, rollout - 2) : 0;
            CHECK(non_cut == rollout + middle_steps);
          }
  }

  TEST_CASE("cut points: the derived chain is GraphCast's, finer, with mesh_edge_embed merged across its end") {
    // Each derived stage lies in one of the builder's stages, or spans only
    // the boundaries that are no cut points.
    for (const testing::ImplementationCase& c : testing::kImplementationCases)
      for (Framework framework : {Framework::pytorch, Framework::jax}) {
        CAPTURE(c.name);
        const CostGraph g = tiny_rollout_3(c, framework);
        const std::vector<int> chain = detail::chain_from_cut_points(g.ops().size(), cut_points(g));
        for (int b : detail::stage_boundaries(g)) {
          const bool split = chain[static_cast<std::size_t>(b)] != chain[static_cast<std::size_t>(b) - 1];
          CHECK(split != expected_non_cut(g, b));
        }
        for (std::size_t i = 1; i < chain.size(); ++i) {
          const bool same_stage = g.ops()[i].stage == g.ops()[i - 1].stage && g.ops()[i].step == g.ops()[i - 1].step;
          if (chain[i] == chain[i - 1] && !same_stage) CHECK(expected_non_cut(g, static_cast<int>(i)));
        }
        CHECK(chain.back() + 1 > static_cast<int>(g.stages().size() + 1) * 3);  // finer than the builder's
      }
  }
}

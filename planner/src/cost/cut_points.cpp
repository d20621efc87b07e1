#include "cost/cut_points.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace actmem::detail {

std::vector<int> crossing_widths(const CostGraph& g) {
  const std::size_t n = g.ops().size();
  std::vector<int> width(n + 1, 0);
  // +1 from the boundary after the producer, -1 after the last use.
  for (std::size_t t = 0; t < g.tensors().size(); ++t) {
    const TensorLifetime& life = g.lifetimes()[t];
    if (g.tensors()[t].role != TensorRole::activation || life.uses == 0) continue;
    ++width[static_cast<std::size_t>(life.producer) + 1];
    --width[static_cast<std::size_t>(life.last_use) + 1];
  }
  for (std::size_t i = 1; i <= n; ++i) width[i] += width[i - 1];
  return width;
}

std::vector<TensorId> crossing_set(const CostGraph& g, int boundary) {
  std::vector<TensorId> set;
  for (std::size_t t = 0; t < g.tensors().size(); ++t) {
    const TensorLifetime& life = g.lifetimes()[t];
    if (g.tensors()[t].role == TensorRole::activation && life.uses > 0 && life.producer < boundary &&
        boundary <= life.last_use)
      set.push_back(static_cast<TensorId>(t));
  }
  return set;
}

std::vector<int> cut_points(const CostGraph& g) {
  const std::vector<int> width = crossing_widths(g);
  const int last = static_cast<int>(g.ops().size()) - 1;  // the last inner boundary
  std::vector<int> cuts;
  for (int from = 1; from <= last;) {
    int to = from;  // the plateau from..to
    while (to < last && width[static_cast<std::size_t>(to) + 1] == width[static_cast<std::size_t>(from)]) ++to;
    const int w = width[static_cast<std::size_t>(from)];
    const bool lower_left = from == 1 || width[static_cast<std::size_t>(from) - 1] > w;
    const bool lower_right = to == last || width[static_cast<std::size_t>(to) + 1] > w;
    if (lower_left && lower_right)
      for (int i = from; i <= to; ++i) cuts.push_back(i);
    from = to + 1;
  }
  return cuts;
}

std::vector<int> stage_boundaries(const CostGraph& g) {
  std::vector<int> boundaries;
  const auto ops = g.ops();
  for (std::size_t i = 1; i < ops.size(); ++i)
    if (ops[i].step != ops[i - 1].step || ops[i].stage != ops[i - 1].stage) boundaries.push_back(static_cast<int>(i));
  return boundaries;
}

std::vector<int> chain_from_cut_points(std::size_t op_count, std::span<const int> cuts) {
  std::vector<int> segment(op_count, 0);
  auto cut = cuts.begin();
  int current = 0;
  for (std::size_t i = 0; i < op_count; ++i) {
    if (cut != cuts.end() && static_cast<std::size_t>(*cut) == i) {
      ++current;
      ++cut;
    }
    segment[i] = current;
  }
  return segment;
}

namespace {

// Stage [from, to) of the ops reads no activation made before it: a branch
// off the inputs and parameters.
bool reads_nothing_before(const CostGraph& g, int from, int to) {
  for (int i = from; i < to; ++i)
    for (TensorId t : g.ops()[static_cast<std::size_t>(i)].inputs)
      if (g.tensor(t).role == TensorRole::activation && g.lifetime(t).producer < from) return false;
  return true;
}

// Per boundary i, the last use of the activations made before it (-1:
// none): those crossing i all end before boundary j exactly when it is < j.
std::vector<int> last_uses_before(const CostGraph& g) {
  std::vector<int> last(g.ops().size() + 1, -1);
  for (std::size_t t = 0; t < g.tensors().size(); ++t) {
    const TensorLifetime& life = g.lifetimes()[t];
    if (g.tensors()[t].role != TensorRole::activation || life.uses == 0) continue;
    int& at = last[static_cast<std::size_t>(life.producer) + 1];
    at = std::max(at, static_cast<int>(life.last_use));
  }
  for (std::size_t i = 1; i < last.size(); ++i) last[i] = std::max(last[i], last[i - 1]);
  return last;
}

}  // namespace

// A stage boundary b that is not a cut point is accepted in two cases, each
// leaning on a neighbouring stage boundary that is one:
// - the stage ending at b is a branch that reads no activation made before
//   it, and the stage boundary where it starts is a cut: what crosses b is
//   what crossed there and the branch's outputs (GraphCast's
//   mesh_edge_embed, reading only inputs and parameters);
// - the stage starting at b is the last use of everything crossing b, and
//   the stage boundary where it ends is a cut: only what it makes crosses
//   there (JAX's loss stage at rollout > 1, whose next_input ends the
//   carry that crosses the whole step).
// The chain of cut points has no boundary at b: it keeps that stage with
// its neighbour.
void check_stage_boundaries(const CostGraph& g) {
  const std::vector<int> stages = stage_boundaries(g);
  const std::vector<int> cuts = cut_points(g);
  const std::vector<int> last_use_before = last_uses_before(g);
  auto is_cut = [&](int b) { return std::binary_search(cuts.begin(), cuts.end(), b); };
  for (std::size_t k = 0; k < stages.size(); ++k) {
    const int b = stages[k];
    if (is_cut(b)) continue;
    const bool branch = k > 0 && is_cut(stages[k - 1]) && reads_nothing_before(g, stages[k - 1], b);
    const bool join = !branch && k + 1 < stages.size() && is_cut(stages[k + 1]) &&
                      last_use_before[static_cast<std::size_t>(b)] < stages[k + 1];
    if (!branch && !join)
      throw std::logic_error(fmt::format(
          "cost graph: the stage boundary before op {} is no cut point of the graph ({} activations cross it)",
          g.ops()[static_cast<std::size_t>(b)].name, crossing_set(g, b).size()));
  }
}

}  // namespace actmem::detail

#include "solve/stage_translates.h"

#include <algorithm>
#include <map>

namespace actmem::detail {
namespace {

std::vector<OpId> ops_of(const CostGraph& g, int step, int stage) {
  std::vector<OpId> ops;
  for (std::size_t i = 0; i < g.ops().size(); ++i)
    if (g.ops()[i].step == step && g.ops()[i].stage == stage) ops.push_back(static_cast<OpId>(i));
  return ops;
}

// Chain positions of t's consumers, moved back by `offset`, sorted.
std::vector<int> consumer_keys(const ReplayGraph& rg, TensorId t, int offset) {
  std::vector<int> keys;
  for (OpId c : rg.graph.consumers(t)) keys.push_back(rg.op_key[static_cast<std::size_t>(c)] - offset);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Whether tensor x of `base` and y of the stage `offset` further on are
// alike for a replay: shape, bytes (padded, J39) and gradient's, role,
// gradient, and where their producer and
// (for activations) consumers sit, and what kind of op produced them.
bool alike(const ReplayGraph& rg, TensorId x, TensorId y, int offset) {
  const CostGraph& g = rg.graph;
  const Tensor& a = g.tensor(x);
  const Tensor& b = g.tensor(y);
  if (a.rows != b.rows || a.cols != b.cols || a.element_bytes != b.element_bytes || a.bytes() != b.bytes() ||
      a.gradient_bytes() != b.gradient_bytes() || a.role != b.role || a.requires_grad != b.requires_grad)
    return false;
  const auto ix = static_cast<std::size_t>(x), iy = static_cast<std::size_t>(y);
  if (rg.has_grad[ix] != rg.has_grad[iy]) return false;
  const OpId px = g.producer(x), py = g.producer(y);
  if ((px < 0) != (py < 0)) return false;
  if (px >= 0 && (rg.producer_key[iy] - rg.producer_key[ix] != offset || g.op(px).kind != g.op(py).kind)) return false;
  // Where an activation is used decides when it is freed; model inputs
  // and parameters are never freed by use (they may well be shared).
  return a.role != TensorRole::activation || consumer_keys(rg, x, 0) == consumer_keys(rg, y, offset);
}

// The correspondence of `base`'s tensors to the stage's, if the stage is a
// translate of base by `offset`.
bool translate(const ReplayGraph& rg, int step, int base, int stage, int offset, StageTranslate& out) {
  const CostGraph& g = rg.graph;
  const std::vector<OpId> a = ops_of(g, step, base), b = ops_of(g, step, stage);
  if (a.size() != b.size()) return false;
  std::map<TensorId, TensorId> to_base, of_base;
  auto pair = [&](TensorId x, TensorId y) {  // x of base, y of the stage
    const auto [ix, new_x] = of_base.emplace(x, y);
    const auto [iy, new_y] = to_base.emplace(y, x);
    if (new_x != new_y || ix->second != y || iy->second != x) return false;
    return !new_x || alike(rg, x, y, offset);
  };
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Op& x = g.op(a[i]);
    const Op& y = g.op(b[i]);
    if (x.kind != y.kind || x.edge_update != y.edge_update || x.inputs.size() != y.inputs.size() ||
        x.outputs.size() != y.outputs.size() || x.releases_held.size() != y.releases_held.size())
      return false;
    for (std::size_t k = 0; k < x.inputs.size(); ++k)
      if (!pair(x.inputs[k], y.inputs[k])) return false;
    for (std::size_t k = 0; k < x.releases_held.size(); ++k)
      if (!pair(x.releases_held[k], y.releases_held[k])) return false;
    for (std::size_t k = 0; k < x.outputs.size(); ++k)
      if (!pair(x.outputs[k], y.outputs[k])) return false;
  }
  // Gradients in flight when their backward starts.
  const auto& in_a = rg.incoming[static_cast<std::size_t>(step)][static_cast<std::size_t>(base)];
  const auto& in_b = rg.incoming[static_cast<std::size_t>(step)][static_cast<std::size_t>(stage)];
  if (in_a.size() != in_b.size()) return false;
  for (TensorId y : in_b) {
    const auto it = to_base.find(y);
    if (it == to_base.end() || std::find(in_a.begin(), in_a.end(), it->second) == in_a.end()) return false;
  }
  out.base = base;
  out.offset = offset;
  out.to_base.assign(to_base.begin(), to_base.end());
  return true;
}

}  // namespace

TensorId StageTranslate::base_of(TensorId t) const {
  const auto it = std::lower_bound(to_base.begin(), to_base.end(), std::make_pair(t, TensorId{-1}));
  return it != to_base.end() && it->first == t ? it->second : -1;
}

TensorId StageTranslate::of_base(TensorId t) const {
  for (const auto& [mine, theirs] : to_base)
    if (theirs == t) return mine;
  return -1;
}

std::vector<StageTranslate> stage_translates(const ReplayGraph& rg, int step, const std::vector<std::int64_t>& edges) {
  std::vector<StageTranslate> out(static_cast<std::size_t>(rg.stage_count));
  for (int s = 0; s < rg.stage_count; ++s)
    for (int base = 0; base < s; ++base) {
      if (edges[static_cast<std::size_t>(base)] != edges[static_cast<std::size_t>(s)]) continue;
      if (out[static_cast<std::size_t>(base)].base >= 0) continue;  // the earliest of its kind
      if (translate(rg, step, base, s, s - base, out[static_cast<std::size_t>(s)])) break;
    }
  return out;
}

}  // namespace actmem::detail

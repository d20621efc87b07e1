#include "simulate/schedule.h"

#include <algorithm>
#include <stdexcept>

namespace actmem {
namespace {

// Ops first..last of ops() (empty: last < first).
struct OpRun {
  OpId first = 0, last = -1;
};

// Widens `run` by the ops under `items`, counting them (each op is in a
// schedule once).
void extend(const std::vector<Item>& items, OpRun& run, OpId& count) {
  for (const Item& item : items) {
    if (item.kind != Item::Kind::op) {
      extend(item.children, run, count);
      continue;
    }
    run.first = count == 0 ? item.op : std::min(run.first, item.op);
    run.last = count == 0 ? item.op : std::max(run.last, item.op);
    ++count;
  }
}

// The ops under `items`. The schedule wraps runs of ops() (stages, a
// stage's edge update, a rollout step), so they are one contiguous run:
// checked, since external_inputs() and region_outputs() rely on it.
OpRun ops_under(const std::vector<Item>& items) {
  OpRun run;
  OpId count = 0;
  extend(items, run, count);
  if (run.last - run.first + 1 != count)
    throw std::logic_error("schedule: a checkpoint over ops that are not one run of the graph's order");
  return run;
}

// Activations read inside and made outside: before the run, since a
// producer precedes its consumers (CostGraph::lifetime()).
std::vector<TensorId> external_inputs(const CostGraph& g, const std::vector<Item>& items) {
  const OpRun inside = ops_under(items);
  std::vector<TensorId> external;
  for (OpId id = inside.first; id <= inside.last; ++id) {
    for (TensorId t : g.op(id).inputs) {
      if (g.tensor(t).role != TensorRole::activation) continue;
      const OpId p = g.lifetime(t).producer;
      if (p >= 0 && p < inside.first && std::find(external.begin(), external.end(), t) == external.end())
        external.push_back(t);
    }
  }
  return external;
}

// Activations made inside and read outside: after the run, so their last
// use is past it.
std::vector<TensorId> region_outputs(const CostGraph& g, const std::vector<Item>& items) {
  const OpRun inside = ops_under(items);
  std::vector<TensorId> out;
  for (OpId id = inside.first; id <= inside.last; ++id)
    for (TensorId t : g.op(id).outputs)
      if (g.lifetime(t).last_use > inside.last) out.push_back(t);
  return out;
}

Item make_blocks(const CostGraph& g, std::vector<Item> ops, std::int64_t edges, std::int64_t blocks) {
  Item item;
  item.kind = Item::Kind::blocks;
  item.first_op = ops.front().op;
  item.name = g.op(item.first_op).name.substr(0, g.op(item.first_op).name.rfind('.'));
  item.output = g.op(ops.back().op).outputs.front();  // the edge MLP's LayerNorm output
  for (const Item& op : ops)
    for (TensorId t : g.op(op.op).outputs)
      if (t != item.output) item.internal.push_back(t);
  for (std::int64_t rows : block_sizes(edges, blocks)) item.block_rows.push_back(rows * g.run().batch);
  item.external_inputs = external_inputs(g, ops);
  item.outputs = {item.output};
  item.children = std::move(ops);
  return item;
}

// The items of one stage: its ops, with the edge update grouped into blocks.
std::vector<Item> stage_items(const CostGraph& g, const std::vector<OpId>& ops, std::int64_t edges,
                              std::int64_t blocks) {
  std::vector<Item> items, edge_update;
  auto flush = [&] {
    if (edge_update.empty()) return;
    items.push_back(make_blocks(g, std::move(edge_update), edges, blocks));
    edge_update.clear();
  };
  for (OpId id : ops) {
    Item op;
    op.op = id;
    if (blocks > 1 && g.op(id).edge_update) {
      edge_update.push_back(std::move(op));
      continue;
    }
    flush();
    items.push_back(std::move(op));
  }
  flush();
  return items;
}

// A checkpoint over `children`.
Item make_region(const CostGraph& g, std::vector<Item> children) {
  Item r;
  r.kind = Item::Kind::region;
  r.children = std::move(children);
  r.external_inputs = external_inputs(g, r.children);
  r.outputs = region_outputs(g, r.children);
  return r;
}

// Items for stages lo..hi with `regions` (sorted, within lo..hi) wrapped.
std::vector<Item> wrap(const CostGraph& g, const std::vector<Region>& regions,
                       std::vector<std::vector<Item>>& per_stage, int lo, int hi) {
  std::vector<Item> items;
  auto region = regions.begin();
  for (int s = lo; s <= hi;) {
    if (region != regions.end() && region->from == s) {
      items.push_back(make_region(g, wrap(g, region->inner, per_stage, region->from, region->to)));
      s = region->to + 1;
      ++region;
      continue;
    }
    for (Item& item : per_stage[static_cast<std::size_t>(s)]) items.push_back(std::move(item));
    ++s;
  }
  return items;
}

}  // namespace

std::vector<OpId> ops_of(const std::vector<Item>& items) {
  std::vector<OpId> ops;
  for (const Item& item : items) {
    const std::vector<OpId> inside = ops_of(item);
    ops.insert(ops.end(), inside.begin(), inside.end());
  }
  return ops;
}

std::vector<OpId> ops_of(const Item& item) {
  return item.kind == Item::Kind::op ? std::vector<OpId>{item.op} : ops_of(item.children);
}

std::vector<std::int64_t> block_sizes(std::int64_t n, std::int64_t blocks) {
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(blocks), n / blocks);
  for (std::int64_t i = 0; i < n % blocks; ++i) ++sizes[static_cast<std::size_t>(i)];
  return sizes;
}

Schedule build_schedule(const CostGraph& g, const Plan& plan) {
  const std::size_t stage_count = g.stages().size();
  const std::vector<std::int64_t> edges = edges_per_stage(g.chain());

  Schedule schedule;
  const auto ops = g.ops();
  std::size_t i = 0;
  for (int step = 0; step < static_cast<int>(g.run().rollout); ++step) {
    std::vector<std::vector<OpId>> stage_ops(stage_count);
    std::vector<Item> loss;
    for (; i < ops.size() && ops[i].step == step; ++i) {
      if (static_cast<std::size_t>(ops[i].stage) < stage_count)
        stage_ops[static_cast<std::size_t>(ops[i].stage)].push_back(static_cast<OpId>(i));
      else {
        Item op;
        op.op = static_cast<OpId>(i);
        loss.push_back(std::move(op));
      }
    }
    std::vector<std::vector<Item>> per_stage(stage_count);
    for (std::size_t s = 0; s < stage_count; ++s)
      per_stage[s] = stage_items(g, stage_ops[s], edges[s], plan.edge_blocks[s]);
    std::vector<Item> items = wrap(g, plan.checkpoints, per_stage, 0, static_cast<int>(stage_count) - 1);
    for (Item& item : loss) items.push_back(std::move(item));
    if (plan.step_checkpoint && g.run().rollout > 1) {
      items = {make_region(g, std::move(items))};
      items.front().loop_body = true;
    }
    for (Item& item : items) schedule.items.push_back(std::move(item));
  }
  return schedule;
}

}  // namespace actmem

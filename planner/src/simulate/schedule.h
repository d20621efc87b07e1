#pragma once
// The schedule a trainer following a plan runs: the cost graph's ops
// arranged as a tree of checkpoint regions and edge-block groups.

#include <cstdint>
#include <string>
#include <vector>

#include "actmem/cost/cost_graph.h"
#include "actmem/simulate/plan.h"

namespace actmem {

struct Item {
  enum class Kind {
    op,      // one op of the cost graph
    region,  // a checkpoint over `children`
    blocks   // an edge update run in blocks, each under its own checkpoint
  };
  Kind kind = Kind::op;
  OpId op = -1;
  std::vector<Item> children;
  // Region and blocks: activations consumed inside but made outside (what
  // the checkpoint keeps).
  std::vector<TensorId> external_inputs;
  // Region and blocks: activations made inside and consumed outside.
  std::vector<TensorId> outputs;

  // Blocks only.
  std::vector<std::int64_t> block_rows;  // rows of each block: sizes differ by at most 1
  std::vector<TensorId> internal;        // tensors made inside, except `output`
  TensorId output = -1;                  // the edge update's result, concatenated over blocks
  OpId first_op = -1;
  std::string name;
  // Region only: a rollout step's checkpoint (the body of XLA's scanned loop).
  bool loop_body = false;
};

struct Schedule {
  std::vector<Item> items;
};

Schedule build_schedule(const CostGraph& graph, const Plan& plan);

// The ops of `items` and of everything inside them, in schedule order.
std::vector<OpId> ops_of(const std::vector<Item>& items);
std::vector<OpId> ops_of(const Item& item);

// Sizes of B contiguous blocks of n items: the first n mod B are one larger.
std::vector<std::int64_t> block_sizes(std::int64_t n, std::int64_t blocks);

}  // namespace actmem

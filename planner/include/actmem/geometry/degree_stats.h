#pragma once
// A summary of the degrees of one node set in one edge set: how uneven the
// receivers' in-degrees are decides how edge blocks balance (docs/geometry.md).

#include <cstdint>
#include <vector>

namespace actmem {

struct DegreeStats {
  std::int64_t nodes = 0;
  std::int64_t edges = 0;  // the sum of the degrees
  std::int64_t min = 0;
  std::int64_t max = 0;
  double mean = 0;          // edges / nodes; 0 for no nodes
  std::int64_t median = 0;  // nearest-rank percentiles
  std::int64_t p99 = 0;
  std::int64_t zero_nodes = 0;  // nodes of degree 0
};

// Summarises `degrees` (one non-negative entry per node). All fields are 0
// for no nodes.
DegreeStats summarize_degrees(const std::vector<std::int64_t>& degrees);

// The degree of each of `node_count` nodes, given the node at one end of every edge.
template <class Edges, class EndOf>
std::vector<std::int64_t> count_degrees(std::size_t node_count, const Edges& edges, EndOf end_of) {
  std::vector<std::int64_t> degrees(node_count, 0);
  for (const auto& e : edges) ++degrees[static_cast<std::size_t>(end_of(e))];
  return degrees;
}

}  // namespace actmem

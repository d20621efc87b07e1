#include "actmem/geometry/degree_stats.h"

#include <algorithm>
#include <cmath>

namespace actmem {
namespace {

// The nearest-rank percentile from a histogram of `total` values: the
// smallest value with at least `percent`% of the values at or below it.
std::int64_t nearest_rank(const std::vector<std::int64_t>& histogram, std::int64_t total, double percent) {
  const auto rank =
      std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(percent / 100.0 * static_cast<double>(total))));
  std::int64_t seen = 0;
  for (std::size_t value = 0; value < histogram.size(); ++value) {
    seen += histogram[value];
    if (seen >= rank) return static_cast<std::int64_t>(value);
  }
  return static_cast<std::int64_t>(histogram.size()) - 1;
}

}  // namespace

DegreeStats summarize_degrees(const std::vector<std::int64_t>& degrees) {
  DegreeStats stats;
  if (degrees.empty()) return stats;
  const auto [lo, hi] = std::minmax_element(degrees.begin(), degrees.end());
  stats.nodes = static_cast<std::int64_t>(degrees.size());
  stats.min = *lo;
  stats.max = *hi;
  // Degrees are small (at most the edge count), so a histogram replaces a sort.
  std::vector<std::int64_t> histogram(static_cast<std::size_t>(stats.max) + 1, 0);
  for (const std::int64_t d : degrees) {
    stats.edges += d;
    ++histogram[static_cast<std::size_t>(d)];
  }
  stats.mean = static_cast<double>(stats.edges) / static_cast<double>(stats.nodes);
  stats.median = nearest_rank(histogram, stats.nodes, 50);
  stats.p99 = nearest_rank(histogram, stats.nodes, 99);
  stats.zero_nodes = histogram[0];
  return stats;
}

}  // namespace actmem

#include "actmem/geometry/uniform_grid_index.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace actmem {

UniformGridIndex::UniformGridIndex(double cell_size) {
  const double span = 2 * kIndexBound;
  double wanted = std::ceil(span / cell_size);
  if (!(wanted >= 1)) wanted = 1;  // also NaN
  cells_per_axis_ = static_cast<int>(std::min(wanted, static_cast<double>(kMaxCellsPerAxis)));
  inverse_cell_size_ = cells_per_axis_ / span;
}

void UniformGridIndex::build(const std::vector<Box3>& boxes) {
  const std::size_t rows = n() * n();
  // Entries: one per (item, overlapped row). Two stable counting sorts, by
  // x_lo and then by row, leave them sorted by (row, x_lo, item).
  std::vector<std::uint32_t> entry_row;
  std::vector<int> entry_lo, entry_hi;
  std::vector<std::uint32_t> entry_item;
  widest_x_span_ = 0;
  for (std::size_t i = 0; i < boxes.size(); ++i) {
    const Box3& b = boxes[i];
    const int x0 = cell_of(b.lo.x), x1 = cell_of(b.hi.x);
    widest_x_span_ = std::max(widest_x_span_, x1 - x0);
    for (int z = cell_of(b.lo.z); z <= cell_of(b.hi.z); ++z) {
      for (int y = cell_of(b.lo.y); y <= cell_of(b.hi.y); ++y) {
        entry_row.push_back(
            static_cast<std::uint32_t>(static_cast<std::size_t>(z) * n() + static_cast<std::size_t>(y)));
        entry_lo.push_back(x0);
        entry_hi.push_back(x1);
        entry_item.push_back(static_cast<std::uint32_t>(i));
      }
    }
  }
  if (entry_row.size() >= std::numeric_limits<std::uint32_t>::max())
    throw std::length_error("UniformGridIndex: too many entries");
  const std::size_t entries = entry_row.size();

  std::vector<std::uint32_t> by_lo(entries);
  {
    std::vector<std::uint32_t> start(n() + 1, 0);
    for (const int x : entry_lo) ++start[static_cast<std::size_t>(x) + 1];
    for (std::size_t x = 0; x < n(); ++x) start[x + 1] += start[x];
    for (std::uint32_t e = 0; e < entries; ++e) by_lo[start[static_cast<std::size_t>(entry_lo[e])]++] = e;
  }
  row_start_.assign(rows + 1, 0);
  for (const std::uint32_t r : entry_row) ++row_start_[r + 1];
  for (std::size_t r = 0; r < rows; ++r) row_start_[r + 1] += row_start_[r];
  std::vector<std::uint32_t> next(row_start_.begin(), row_start_.end() - 1);
  x_lo_.resize(entries);
  x_hi_.resize(entries);
  item_.resize(entries);
  for (const std::uint32_t e : by_lo) {
    const std::uint32_t k = next[entry_row[e]]++;
    x_lo_[k] = entry_lo[e];
    x_hi_[k] = entry_hi[e];
    item_[k] = entry_item[e];
  }
}

std::uint32_t UniformGridIndex::first_reaching(std::size_t row, int x) const {
  const auto begin = x_lo_.begin() + row_start_[row];
  const auto end = x_lo_.begin() + row_start_[row + 1];
  return static_cast<std::uint32_t>(std::lower_bound(begin, end, x - widest_x_span_) - x_lo_.begin());
}

}  // namespace actmem

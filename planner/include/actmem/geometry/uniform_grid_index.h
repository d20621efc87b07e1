#pragma once
// A spatial index for items on or near the unit sphere: a uniform grid of
// cubic cells over the cube [-kIndexBound, kIndexBound]^3.
//
// Each item is an axis-aligned box; it is listed once in every (y, z) row of
// cells its box overlaps, with the range of x cells it covers. Only rows are
// allocated (cells_per_axis² of them), and each row's entries are sorted by
// their first x cell, so memory grows with the items and the rows, not with
// the cube's volume. Coordinates outside the cube clamp to the border cells.

#include <cmath>
#include <cstdint>
#include <vector>

#include "actmem/geometry/vec3.h"

namespace actmem {

struct Box3 {
  Vec3 lo;
  Vec3 hi;
};

inline constexpr double kIndexBound = 1.0 + 1e-6;

class UniformGridIndex {
 public:
  // Cells of edge `cell_size`, or larger where that would take more than
  // kMaxCellsPerAxis cells along an axis.
  explicit UniformGridIndex(double cell_size);

  static constexpr int kMaxCellsPerAxis = 4096;

  // Indexes items 0..boxes.size()-1 by their boxes, replacing what was there.
  void build(const std::vector<Box3>& boxes);

  int cells_per_axis() const { return cells_per_axis_; }
  double cell_size() const { return 2 * kIndexBound / cells_per_axis_; }

  // Calls visit(item) for every item listed in a cell that `query` overlaps:
  // every item whose box overlaps the query box, and possibly some others.
  // An item is visited once per row of cells that both boxes overlap, so a
  // point item, or any item under a point query, is visited exactly once.
  template <class Visit>
  void for_each_candidate(const Box3& query, Visit&& visit) const {
    const int x0 = cell_of(query.lo.x), x1 = cell_of(query.hi.x);
    const int y0 = cell_of(query.lo.y), y1 = cell_of(query.hi.y);
    const int z0 = cell_of(query.lo.z), z1 = cell_of(query.hi.z);
    for (int z = z0; z <= z1; ++z) {
      for (int y = y0; y <= y1; ++y) {
        const std::size_t row = static_cast<std::size_t>(z) * n() + static_cast<std::size_t>(y);
        std::uint32_t k = first_reaching(row, x0);
        const std::uint32_t end = row_start_[row + 1];
        for (; k < end && x_lo_[k] <= x1; ++k)
          if (x_hi_[k] >= x0) visit(item_[k]);
      }
    }
  }

 private:
  std::size_t n() const { return static_cast<std::size_t>(cells_per_axis_); }

  int cell_of(double coordinate) const {
    const double c = std::floor((coordinate + kIndexBound) * inverse_cell_size_);
    if (!(c >= 0)) return 0;  // also NaN
    return c >= cells_per_axis_ ? cells_per_axis_ - 1 : static_cast<int>(c);
  }

  // The first entry of `row` that can reach x cell `x` (x_lo ≥ x - widest span).
  std::uint32_t first_reaching(std::size_t row, int x) const;

  int cells_per_axis_ = 1;
  double inverse_cell_size_ = 1 / (2 * kIndexBound);
  int widest_x_span_ = 0;  // max over entries of x_hi - x_lo
  // Entries of row r (= z · cells_per_axis + y) are [row_start_[r], row_start_[r+1]),
  // sorted by x_lo, then item.
  std::vector<std::uint32_t> row_start_;
  std::vector<int> x_lo_;
  std::vector<int> x_hi_;
  std::vector<std::uint32_t> item_;
};

}  // namespace actmem

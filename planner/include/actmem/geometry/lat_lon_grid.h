#pragma once
// The equiangular latitude–longitude grid GraphCast predicts on
// (docs/geometry.md, "Grid").
//
// Latitudes run from -90° to 90° inclusive and longitudes from 0° up to but
// excluding 360°, both in steps of the resolution; grid point (i, j) has
// flat index i·longitude_count + j (latitude-major, as the reference
// flattens its [lat, lon] arrays).

#include <cstdint>
#include <string>
#include <vector>

#include "actmem/geometry/vec3.h"

namespace actmem {

// Why `resolution_deg` is not a grid resolution, or "" when it is: it must be
// at least kMinResolutionDeg and divide 180 and 360 to within 1e-9.
std::string resolution_problem(double resolution_deg);

// Finer grids take more than seconds and hundreds of MB to connect to the
// mesh (0.1°: 1.6 s and 750 MB at level 6; 0.05°: 15 s and 7 GB).
inline constexpr double kMinResolutionDeg = 0.25;

class LatLonGrid {
 public:
  // Throws InputError("--resolution", "", resolution_problem(...)).
  explicit LatLonGrid(double resolution_deg);

  double resolution_deg() const { return resolution_deg_; }
  int latitude_count() const { return latitude_count_; }    // 180/res + 1
  int longitude_count() const { return longitude_count_; }  // 360/res
  std::int64_t size() const { return std::int64_t{latitude_count_} * longitude_count_; }

  // Exact multiples of the step: -90 + 180·i/(latitude_count-1), 360·j/longitude_count.
  double latitude_deg(int i) const;
  double longitude_deg(int j) const;

  // The unit vectors of all points in flat-index order, computed as the
  // reference does in float64: with colatitude θ = deg2rad(90 - lat) and
  // φ = deg2rad(lon), (cos φ · sin θ, sin φ · sin θ, cos θ).
  std::vector<Vec3> points() const;

 private:
  double resolution_deg_;
  int latitude_count_;
  int longitude_count_;
};

}  // namespace actmem

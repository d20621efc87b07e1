#include "actmem/geometry/lat_lon_grid.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "actmem/util/error.h"

namespace actmem {
namespace {

// numpy's deg2rad: x · (π/180).
double deg2rad(double degrees) { return degrees * (std::numbers::pi / 180.0); }

bool divides(double step, double whole) {
  const double steps = whole / step;
  return std::abs(steps - std::round(steps)) <= 1e-9 * std::max(1.0, steps);
}

int step_count(double step, double whole) { return static_cast<int>(std::lround(whole / step)); }

}  // namespace

std::string resolution_problem(double resolution_deg) {
  if (!std::isfinite(resolution_deg) || resolution_deg < kMinResolutionDeg || resolution_deg > 180 ||
      !divides(resolution_deg, 180) || !divides(resolution_deg, 360))
    return fmt::format("expected a resolution in degrees of at least {} that divides 180 and 360, got {}",
                       kMinResolutionDeg, resolution_deg);
  return "";
}

LatLonGrid::LatLonGrid(double resolution_deg) : resolution_deg_(resolution_deg) {
  if (std::string problem = resolution_problem(resolution_deg); !problem.empty())
    throw InputError::argument("resolution_deg", std::move(problem));
  latitude_count_ = step_count(resolution_deg, 180) + 1;
  longitude_count_ = step_count(resolution_deg, 360);
}

double LatLonGrid::latitude_deg(int i) const { return -90.0 + 180.0 * i / (latitude_count_ - 1); }

double LatLonGrid::longitude_deg(int j) const { return 360.0 * j / longitude_count_; }

std::vector<Vec3> LatLonGrid::points() const {
  // The same products as the reference's meshgrid expression; the sines and
  // cosines are computed once per row and column.
  std::vector<double> cos_lon(static_cast<std::size_t>(longitude_count_));
  std::vector<double> sin_lon(cos_lon.size());
  for (int j = 0; j < longitude_count_; ++j) {
    const double phi = deg2rad(longitude_deg(j));
    cos_lon[static_cast<std::size_t>(j)] = std::cos(phi);
    sin_lon[static_cast<std::size_t>(j)] = std::sin(phi);
  }
  std::vector<Vec3> points;
  points.reserve(static_cast<std::size_t>(size()));
  for (int i = 0; i < latitude_count_; ++i) {
    const double theta = deg2rad(90.0 - latitude_deg(i));
    const double sin_theta = std::sin(theta);
    const double cos_theta = std::cos(theta);
    for (std::size_t j = 0; j < cos_lon.size(); ++j)
      points.push_back({cos_lon[j] * sin_theta, sin_lon[j] * sin_theta, cos_theta});
  }
  return points;
}

}  // namespace actmem

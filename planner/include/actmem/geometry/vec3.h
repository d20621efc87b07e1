#pragma once
// Points in 3-D: Vec3 (float64) for arithmetic and queries, Vec3f (float32)
// for mesh vertices, which the reference GraphCast code stores in float32.
// Widening a Vec3f to Vec3 is exact.

namespace actmem {

struct Vec3 {
  double x = 0;
  double y = 0;
  double z = 0;
};

struct Vec3f {
  float x = 0;
  float y = 0;
  float z = 0;
};

inline Vec3 widen(const Vec3f& v) { return {v.x, v.y, v.z}; }

inline Vec3 operator-(const Vec3& a, const Vec3& b) { return {a.x - b.x, a.y - b.y, a.z - b.z}; }

// Evaluated left to right, ((x·x + y·y) + z·z), like scipy's cKDTree does for
// three dimensions; grid2mesh counts depend on this order (docs/geometry.md).
inline double dot(const Vec3& a, const Vec3& b) { return a.x * b.x + a.y * b.y + a.z * b.z; }

inline double squared_distance(const Vec3& a, const Vec3& b) {
  const Vec3 d = a - b;
  return dot(d, d);
}

inline Vec3 cross(const Vec3& a, const Vec3& b) {
  return {a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x};
}

}  // namespace actmem

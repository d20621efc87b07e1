#pragma once
// The two bipartite graphs between the lat-lon grid and the multi-mesh
// (docs/geometry.md, "Grid2mesh" and "Mesh2grid"). Both use a
// UniformGridIndex, so each grid point examines only nearby mesh nodes/faces.

#include <cstdint>
#include <vector>

#include "actmem/geometry/icosahedral_mesh.h"
#include "actmem/geometry/vec3.h"

namespace actmem {

// One grid point and one mesh node (the direction is up to the caller:
// grid2mesh sends grid -> mesh, mesh2grid mesh -> grid).
struct GridMeshPair {
  std::uint32_t grid = 0;
  std::uint32_t mesh = 0;
  friend bool operator==(const GridMeshPair&, const GridMeshPair&) = default;
};

// Grid2mesh: every (grid point, mesh vertex) pair whose squared straight-line
// distance, computed in float64 as ((dx² + dy²) + dz²) from the float32
// vertices widened to float64, is ≤ radius² (radius · radius in float64).
// That is exactly scipy's cKDTree.query_ball_point(grid, r=radius) on those
// vertices. Sorted by (grid, mesh). The test is symmetric in the two points.
std::vector<GridMeshPair> radius_query_pairs(const std::vector<Vec3>& grid_points,
                                             const std::vector<Vec3f>& mesh_vertices, double radius);

// Whether p lies inside or on the spherical triangle (a, b, c) (counter-
// clockwise seen from outside): on the non-negative side of the three planes
// through the origin and an edge. The plane test for an edge is computed from
// its endpoints in index order (u < v), and negated for the other direction,
// so two faces sharing an edge never both exclude a point on it.
struct SphericalTriangle {
  // Inward normals of the planes through edges ab, bc, ca.
  Vec3 normal[3];
};
SphericalTriangle spherical_triangle(const std::vector<Vec3f>& vertices, const Face& face);
inline bool contains(const SphericalTriangle& t, const Vec3& p) {
  return dot(t.normal[0], p) >= 0 && dot(t.normal[1], p) >= 0 && dot(t.normal[2], p) >= 0;
}
// min over the three planes of normal·p: ≥ 0 inside or on, larger is deeper.
double inside_margin(const SphericalTriangle& t, const Vec3& p);

// Mesh2grid: for every grid point, the index into `faces` of the triangle
// that contains it. A point on a shared edge or vertex is contained by several
// and gets the lowest face index among them. A point that rounding leaves in
// no triangle at all (not seen on the standard grids) gets the face with the
// largest inside_margin, found by trying every face, and is counted.
struct ContainingFaces {
  std::vector<std::uint32_t> face;             // per grid point
  std::int64_t points_on_shared_boundary = 0;  // contained by more than one face
  std::int64_t points_in_no_face = 0;          // resolved by the fallback
};
ContainingFaces containing_faces(const std::vector<Vec3>& grid_points, const std::vector<Vec3f>& mesh_vertices,
                                 const std::vector<Face>& faces);

}  // namespace actmem

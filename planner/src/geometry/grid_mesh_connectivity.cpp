#include "actmem/geometry/grid_mesh_connectivity.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "actmem/geometry/uniform_grid_index.h"

namespace actmem {
namespace {

Box3 around(const Vec3& p, double half_width) {
  return {{p.x - half_width, p.y - half_width, p.z - half_width},
          {p.x + half_width, p.y + half_width, p.z + half_width}};
}

// The normal of the plane through the origin, u and v, oriented by index so
// that plane(u, v) == -plane(v, u) exactly.
Vec3 edge_plane_normal(const std::vector<Vec3f>& vertices, std::uint32_t u, std::uint32_t v) {
  if (u < v) return cross(widen(vertices[u]), widen(vertices[v]));
  const Vec3 n = cross(widen(vertices[v]), widen(vertices[u]));
  return {-n.x, -n.y, -n.z};
}

// A box holding the spherical triangle: its corners' box widened by the most
// the sphere can bulge beyond the flat triangle (< longest edge² for the
// near-equilateral triangles of the mesh).
Box3 spherical_triangle_box(const std::vector<Vec3f>& vertices, const Face& f) {
  const Vec3 a = widen(vertices[f.a]), b = widen(vertices[f.b]), c = widen(vertices[f.c]);
  const double longest2 = std::max({squared_distance(a, b), squared_distance(b, c), squared_distance(c, a)});
  const double pad = longest2 + 1e-9;
  return {{std::min({a.x, b.x, c.x}) - pad, std::min({a.y, b.y, c.y}) - pad, std::min({a.z, b.z, c.z}) - pad},
          {std::max({a.x, b.x, c.x}) + pad, std::max({a.y, b.y, c.y}) + pad, std::max({a.z, b.z, c.z}) + pad}};
}

}  // namespace

std::vector<GridMeshPair> radius_query_pairs(const std::vector<Vec3>& grid_points,
                                             const std::vector<Vec3f>& mesh_vertices, double radius) {
  std::vector<Vec3> mesh(mesh_vertices.size());
  std::vector<Box3> boxes(mesh_vertices.size());
  for (std::size_t i = 0; i < mesh.size(); ++i) {
    mesh[i] = widen(mesh_vertices[i]);
    boxes[i] = {mesh[i], mesh[i]};
  }
  UniformGridIndex index(radius);
  index.build(boxes);

  const double radius2 = radius * radius;
  // The query box is widened by a hair so that rounding in the box never
  // hides a vertex the exact distance test accepts.
  const double reach = radius * (1 + 1e-12) + 1e-15;
  std::vector<GridMeshPair> pairs;
  pairs.reserve(grid_points.size() * 2);
  for (std::size_t g = 0; g < grid_points.size(); ++g) {
    const Vec3& p = grid_points[g];
    const std::size_t first = pairs.size();
    index.for_each_candidate(around(p, reach), [&](std::uint32_t m) {
      if (squared_distance(p, mesh[m]) <= radius2) pairs.push_back({static_cast<std::uint32_t>(g), m});
    });
    std::sort(pairs.begin() + static_cast<std::ptrdiff_t>(first), pairs.end(),
              [](const GridMeshPair& x, const GridMeshPair& y) { return x.mesh < y.mesh; });
  }
  return pairs;
}

SphericalTriangle spherical_triangle(const std::vector<Vec3f>& vertices, const Face& f) {
  return {{edge_plane_normal(vertices, f.a, f.b), edge_plane_normal(vertices, f.b, f.c),
           edge_plane_normal(vertices, f.c, f.a)}};
}

double inside_margin(const SphericalTriangle& t, const Vec3& p) {
  return std::min({dot(t.normal[0], p), dot(t.normal[1], p), dot(t.normal[2], p)});
}

ContainingFaces containing_faces(const std::vector<Vec3>& grid_points, const std::vector<Vec3f>& mesh_vertices,
                                 const std::vector<Face>& faces) {
  // The grid points are indexed and each face visits the points near it, in
  // face order, so the first face to claim a point is the lowest-numbered.
  std::vector<Box3> boxes(faces.size());
  double widest_box = 0;
  for (std::size_t f = 0; f < faces.size(); ++f) {
    boxes[f] = spherical_triangle_box(mesh_vertices, faces[f]);
    const Vec3 extent = boxes[f].hi - boxes[f].lo;
    widest_box = std::max({widest_box, extent.x, extent.y, extent.z});
  }
  std::vector<Box3> point_boxes(grid_points.size());
  for (std::size_t g = 0; g < grid_points.size(); ++g) point_boxes[g] = {grid_points[g], grid_points[g]};
  // Cells as wide as the widest face box: a face's box spans at most 2 x 2 rows.
  UniformGridIndex index(widest_box);
  index.build(point_boxes);

  constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  ContainingFaces result;
  result.face.assign(grid_points.size(), kNone);
  std::vector<std::uint8_t> claims(grid_points.size(), 0);  // saturates at 2
  for (std::uint32_t f = 0; f < faces.size(); ++f) {
    const SphericalTriangle triangle = spherical_triangle(mesh_vertices, faces[f]);
    index.for_each_candidate(boxes[f], [&](std::uint32_t g) {
      if (claims[g] == 2 || !contains(triangle, grid_points[g])) return;
      if (claims[g]++ == 0) result.face[g] = f;
    });
  }
  for (std::size_t g = 0; g < grid_points.size(); ++g) {
    if (claims[g] > 1) ++result.points_on_shared_boundary;
    if (claims[g] > 0) continue;
    // Rounding left the point in no face: take the face it is least outside.
    ++result.points_in_no_face;
    double best = -std::numeric_limits<double>::infinity();
    for (std::uint32_t f = 0; f < faces.size(); ++f) {
      const double margin = inside_margin(spherical_triangle(mesh_vertices, faces[f]), grid_points[g]);
      if (margin > best) {
        best = margin;
        result.face[g] = f;
      }
    }
  }
  return result;
}

}  // namespace actmem

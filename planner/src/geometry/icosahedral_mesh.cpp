#include "actmem/geometry/icosahedral_mesh.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <unordered_map>

#include "actmem/util/error.h"

namespace actmem {
namespace {

// The 20 faces of the reference icosahedron over its 12 vertices, each
// counter-clockwise seen from outside (graphcast/icosahedral_mesh.py).
constexpr std::array<Face, 20> kIcosahedronFaces{{
    {0, 1, 2},  {0, 6, 1},   {8, 0, 2},  {8, 4, 0}, {3, 8, 2},   {3, 2, 7},  {7, 2, 1},
    {0, 4, 6},  {4, 11, 6},  {6, 11, 5}, {1, 5, 7}, {4, 10, 11}, {4, 8, 10}, {10, 8, 3},
    {10, 3, 9}, {11, 10, 9}, {11, 9, 5}, {5, 9, 7}, {9, 3, 7},   {1, 6, 5},
}};

// The rotation about y that puts a face at each pole, as scipy's
// Rotation.from_euler("y", angle).as_matrix() computes it: from the
// quaternion (0, sin(angle/2), 0, cos(angle/2)).
std::array<std::array<double, 3>, 3> pole_face_rotation() {
  const double phi = std::numbers::phi;
  const double angle_between_faces = 2 * std::asin(phi / std::sqrt(3.0));
  const double angle = (std::numbers::pi - angle_between_faces) / 2;
  const double y = std::sin(angle / 2);
  const double w = std::cos(angle / 2);
  const double y2 = y * y;
  const double w2 = w * w;
  const double yw = y * w;
  // scipy's expressions with x = z = 0, e.g. m00 = x² - y² - z² + w².
  std::array<std::array<double, 3>, 3> m{};
  m[0] = {(0 - y2 - 0) + w2, 0, 2 * (0 + yw)};
  m[1] = {0, (-0.0 + y2 - 0) + w2, 0};
  m[2] = {2 * (0 - yw), 0, (-0.0 - y2 + 0) + w2};
  return m;
}

// The 12 vertices in the reference order: for c1 in (1, -1), c2 in (φ, -φ):
// (c1, c2, 0), (0, c1, c2), (c2, 0, c1); rounded to float32, divided in
// float32 by |(1, φ)|, rotated as row vectors (v · R) in float64, and rounded
// to float32 again.
std::vector<Vec3f> icosahedron_vertices() {
  const float phi = static_cast<float>(std::numbers::phi);
  const float norm = static_cast<float>(std::sqrt(1.0 + std::numbers::phi * std::numbers::phi));
  std::vector<Vec3f> corners;
  for (const float c1 : {1.0f, -1.0f}) {
    for (const float c2 : {phi, -phi}) {
      corners.push_back({c1, c2, 0.0f});
      corners.push_back({0.0f, c1, c2});
      corners.push_back({c2, 0.0f, c1});
    }
  }
  const auto r = pole_face_rotation();
  std::vector<Vec3f> vertices;
  for (const Vec3f& c : corners) {
    const Vec3 v = widen(Vec3f{c.x / norm, c.y / norm, c.z / norm});
    const auto column = [&](int j) {
      const auto k = static_cast<std::size_t>(j);
      return static_cast<float>(v.x * r[0][k] + v.y * r[1][k] + v.z * r[2][k]);
    };
    vertices.push_back({column(0), column(1), column(2)});
  }
  return vertices;
}

// The normalised midpoint, in float32 as numpy computes it for float32
// vertices: mean ((a + b) / 2), then division by sqrt((x² + y²) + z²).
Vec3f normalized_midpoint(const Vec3f& a, const Vec3f& b) {
  const Vec3f m{(a.x + b.x) / 2.0f, (a.y + b.y) / 2.0f, (a.z + b.z) / 2.0f};
  const float length = std::sqrt(m.x * m.x + m.y * m.y + m.z * m.z);
  return {m.x / length, m.y / length, m.z / length};
}

std::uint64_t edge_key(std::uint32_t u, std::uint32_t v) {
  if (u > v) std::swap(u, v);
  return (std::uint64_t{u} << 32) | v;
}

// Splits every face of `faces` into 4, appending the new midpoints to
// `vertices` in the order the reference creates them.
std::vector<Face> split_faces(const std::vector<Face>& faces, std::vector<Vec3f>& vertices) {
  std::unordered_map<std::uint64_t, std::uint32_t> midpoint_of_edge;
  midpoint_of_edge.reserve(faces.size() * 2);
  const auto midpoint = [&](std::uint32_t u, std::uint32_t v) {
    const auto [it, inserted] = midpoint_of_edge.try_emplace(edge_key(u, v), 0);
    if (inserted) {
      it->second = static_cast<std::uint32_t>(vertices.size());
      vertices.push_back(normalized_midpoint(vertices[u], vertices[v]));
    }
    return it->second;
  };
  std::vector<Face> children;
  children.reserve(faces.size() * 4);
  for (const Face& f : faces) {
    const std::uint32_t ab = midpoint(f.a, f.b);
    const std::uint32_t bc = midpoint(f.b, f.c);
    const std::uint32_t ca = midpoint(f.c, f.a);
    children.push_back({f.a, ab, ca});
    children.push_back({ab, f.b, bc});
    children.push_back({ca, bc, f.c});
    children.push_back({ab, bc, ca});
  }
  return children;
}

}  // namespace

std::int64_t mesh_vertex_count(int level) { return 10 * (std::int64_t{1} << (2 * level)) + 2; }

std::int64_t mesh_face_count(int level) { return 20 * (std::int64_t{1} << (2 * level)); }

std::int64_t multimesh_directed_edge_count(int level) {
  std::int64_t edges = 0;
  for (int r = 0; r <= level; ++r) edges += 60 * (std::int64_t{1} << (2 * r));
  return edges;
}

std::string mesh_level_problem(int level) {
  if (level < 0 || level > kMaxMeshLevel)
    return fmt::format("expected a mesh level from 0 to {}, got {}", kMaxMeshLevel, level);
  return "";
}

IcosahedralMultiMesh build_icosahedral_multimesh(int level) {
  if (std::string problem = mesh_level_problem(level); !problem.empty())
    throw InputError::argument("mesh_level", std::move(problem));
  IcosahedralMultiMesh mesh;
  mesh.vertices = icosahedron_vertices();
  mesh.vertices.reserve(static_cast<std::size_t>(mesh_vertex_count(level)));
  mesh.faces_by_level.emplace_back(kIcosahedronFaces.begin(), kIcosahedronFaces.end());
  for (int r = 1; r <= level; ++r)
    mesh.faces_by_level.push_back(split_faces(mesh.faces_by_level.back(), mesh.vertices));
  return mesh;
}

std::vector<MeshEdge> multimesh_edges(const IcosahedralMultiMesh& mesh) {
  // Bucket the senders by receiver (a counting sort), then sort and
  // deduplicate each receiver's few senders: linear in the edge count.
  const std::size_t vertex_count = mesh.vertices.size();
  std::vector<std::size_t> start(vertex_count + 1, 0);
  for (const auto& faces : mesh.faces_by_level) {
    for (const Face& f : faces) {
      ++start[f.b + 1];
      ++start[f.c + 1];
      ++start[f.a + 1];
    }
  }
  for (std::size_t v = 0; v < vertex_count; ++v) start[v + 1] += start[v];
  std::vector<std::uint32_t> senders(start[vertex_count]);
  std::vector<std::size_t> next(start.begin(), start.end() - 1);
  for (const auto& faces : mesh.faces_by_level) {
    for (const Face& f : faces) {
      senders[next[f.b]++] = f.a;
      senders[next[f.c]++] = f.b;
      senders[next[f.a]++] = f.c;
    }
  }
  std::vector<MeshEdge> edges;
  edges.reserve(senders.size());
  for (std::size_t v = 0; v < vertex_count; ++v) {
    const auto first = senders.begin() + static_cast<std::ptrdiff_t>(start[v]);
    const auto last = senders.begin() + static_cast<std::ptrdiff_t>(start[v + 1]);
    std::sort(first, last);
    const auto kept = std::unique(first, last);
    for (auto it = first; it != kept; ++it) edges.push_back({*it, static_cast<std::uint32_t>(v)});
  }
  return edges;
}

double longest_finest_edge(const IcosahedralMultiMesh& mesh) {
  const auto length = [&](std::uint32_t u, std::uint32_t v) {
    const Vec3f& p = mesh.vertices[u];
    const Vec3f& q = mesh.vertices[v];
    const float dx = p.x - q.x;
    const float dy = p.y - q.y;
    const float dz = p.z - q.z;
    return std::sqrt(dx * dx + dy * dy + dz * dz);
  };
  float longest = 0;
  for (const Face& f : mesh.finest_faces())
    longest = std::max({longest, length(f.a, f.b), length(f.b, f.c), length(f.c, f.a)});
  return longest;
}

}  // namespace actmem

#pragma once
// GraphCast's icosahedral multi-mesh (docs/geometry.md, "Multi-mesh").
//
// Level 0 is a regular icosahedron inscribed in the unit sphere, oriented as
// the reference code orients it (a face, not a vertex, at each pole). Level
// r+1 splits every face of level r into 4 at the normalised midpoints of its
// edges. Vertices are float32 and rounded exactly as the reference rounds
// them, so coarser levels' vertices are a prefix of the finer levels' ones and
// the finest level's vertex list is the mesh-node list.

#include <cstdint>
#include <string>
#include <vector>

#include "actmem/geometry/vec3.h"

namespace actmem {

// A triangle as three vertex indices, counter-clockwise seen from outside.
struct Face {
  std::uint32_t a = 0;
  std::uint32_t b = 0;
  std::uint32_t c = 0;
};

// A directed mesh edge, sender -> receiver.
struct MeshEdge {
  std::uint32_t sender = 0;
  std::uint32_t receiver = 0;
  friend bool operator==(const MeshEdge&, const MeshEdge&) = default;
};

// Level 8 (655,362 vertices) with the finest grid and the widest radius takes
// about 2 s and 450 MB; level 10 took minutes and gigabytes with fine grids
// (docs/reliability.md).
inline constexpr int kMaxMeshLevel = 8;

// Why `level` is not a mesh level, or "" when it is: it must lie in 0..kMaxMeshLevel.
std::string mesh_level_problem(int level);

struct IcosahedralMultiMesh {
  // All vertices of the finest level, unit length up to float32 rounding.
  std::vector<Vec3f> vertices;
  // faces_by_level[r]: the 20·4^r faces of level r. Face f of level r is
  // split into faces 4f, 4f+1, 4f+2, 4f+3 of level r+1 (corners a, b, c, centre).
  std::vector<std::vector<Face>> faces_by_level;

  int level() const { return static_cast<int>(faces_by_level.size()) - 1; }
  const std::vector<Face>& finest_faces() const { return faces_by_level.back(); }
};

// The multi-mesh refined `level` times (0..kMaxMeshLevel; a level outside that
// range throws InputError("--mesh-level", "", mesh_level_problem(level))). Level 6 takes a few ms; level
// 8 has 655,362 vertices.
IcosahedralMultiMesh build_icosahedral_multimesh(int level);

// The multi-mesh edges: the edges of every level's faces (a->b, b->c, c->a),
// which for a closed, consistently oriented mesh gives both directions of every
// edge, deduplicated and sorted by (receiver, sender).
std::vector<MeshEdge> multimesh_edges(const IcosahedralMultiMesh& mesh);

// The longest edge of the finest level's faces, computed as the reference does
// (float32 differences, squares, sum and square root), widened to double.
double longest_finest_edge(const IcosahedralMultiMesh& mesh);

// Closed forms: 10·4^level + 2 vertices; Σ_{r=0..level} 60·4^r directed edges;
// 20·4^level faces.
std::int64_t mesh_vertex_count(int level);
std::int64_t multimesh_directed_edge_count(int level);
std::int64_t mesh_face_count(int level);

}  // namespace actmem

#pragma once
// GraphCast's graph sizes computed from the actual geometry: the icosahedral
// multi-mesh, the latitude–longitude grid and the two bipartite graphs
// between them (see docs/geometry.md).

#include <cstdint>
#include <string>

#include "actmem/geometry/degree_stats.h"

namespace actmem {

struct GeometrySpec {
  double resolution_deg = 0.25;
  int mesh_level = 6;
  double radius_query_fraction = 0.6;  // of the longest edge of the finest mesh
};

// Why `fraction` is not a radius query fraction, or "" when it is: it must
// lie in (0, 2].
std::string radius_fraction_problem(double fraction);

// Node and directed-edge counts of the five sets a GraphCast model uses.
struct GraphCounts {
  std::int64_t grid_nodes = 0;
  std::int64_t mesh_nodes = 0;
  std::int64_t mesh_edges = 0;
  std::int64_t grid2mesh_edges = 0;
  std::int64_t mesh2grid_edges = 0;
};

// Computes the counts exactly (docs/geometry.md states what "exactly" means
// for grid2mesh, whose count depends on floating-point rounding).
// Throws InputError for a resolution that does not divide 180 and 360
// (source "--resolution"), a mesh level outside 0..kMaxMeshLevel ("--mesh-level") or a
// radius fraction outside (0, 2] ("--radius-fraction").
GraphCounts compute_graph_counts(const GeometrySpec& spec);

// The counts with what `actmem mesh` reports about them. Degrees are per
// node set: "in" counts edges received, "out" edges sent.
struct GraphGeometry {
  GeometrySpec spec;
  GraphCounts counts;
  double longest_mesh_edge = 0;  // of the finest level, on the unit sphere
  double radius = 0;             // grid2mesh radius: fraction · longest edge

  DegreeStats grid2mesh_mesh_in;   // zero_nodes: mesh nodes no grid point reaches
  DegreeStats grid2mesh_grid_out;  // zero_nodes: grid points that feed no mesh node
  DegreeStats mesh_in;
  DegreeStats mesh2grid_grid_in;  // 3 everywhere by construction
  DegreeStats mesh2grid_mesh_out;

  // Grid points on an edge or vertex shared by several finest faces (given to
  // the lowest-numbered), and points rounding put in no face (given to the
  // nearest one; 0 on the standard grids).
  std::int64_t grid_points_on_shared_boundary = 0;
  std::int64_t grid_points_in_no_face = 0;
};

// Same errors as compute_graph_counts.
GraphGeometry analyze_graph_geometry(const GeometrySpec& spec);

}  // namespace actmem

#include "actmem/geometry/graph_counts.h"

#include <fmt/format.h>

#include <cmath>

#include "actmem/geometry/grid_mesh_connectivity.h"
#include "actmem/geometry/icosahedral_mesh.h"
#include "actmem/geometry/lat_lon_grid.h"
#include "actmem/util/error.h"
#include "actmem/util/progress.h"

namespace actmem {

std::string radius_fraction_problem(double fraction) {
  if (!(fraction > 0 && fraction <= 2))
    return fmt::format("expected a radius fraction greater than 0 and at most 2, got {}", fraction);
  return "";
}

GraphGeometry analyze_graph_geometry(const GeometrySpec& spec) {
  // Validate everything before the expensive parts.
  const LatLonGrid grid(spec.resolution_deg);
  if (std::string problem = radius_fraction_problem(spec.radius_query_fraction); !problem.empty())
    throw InputError::argument("radius_query_fraction", std::move(problem));
  constexpr int kSteps = 5;
  report_progress("geometry: icosahedral multi-mesh", 1, kSteps);
  const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(spec.mesh_level);

  GraphGeometry out;
  out.spec = spec;
  report_progress("geometry: lat-lon grid", 2, kSteps);
  const std::vector<Vec3> grid_points = grid.points();
  const std::size_t grid_count = grid_points.size();
  const std::size_t mesh_count = mesh.vertices.size();
  out.counts.grid_nodes = static_cast<std::int64_t>(grid_count);
  out.counts.mesh_nodes = static_cast<std::int64_t>(mesh_count);

  report_progress("geometry: mesh edges", 3, kSteps);
  const std::vector<MeshEdge> mesh_edges = multimesh_edges(mesh);
  out.counts.mesh_edges = static_cast<std::int64_t>(mesh_edges.size());
  out.mesh_in = summarize_degrees(count_degrees(mesh_count, mesh_edges, [](const MeshEdge& e) { return e.receiver; }));

  // The reference multiplies the float32 longest edge by the fraction in float64.
  out.longest_mesh_edge = longest_finest_edge(mesh);
  out.radius = out.longest_mesh_edge * spec.radius_query_fraction;
  report_progress("geometry: grid2mesh radius query", 4, kSteps);
  const std::vector<GridMeshPair> grid2mesh = radius_query_pairs(grid_points, mesh.vertices, out.radius);
  out.counts.grid2mesh_edges = static_cast<std::int64_t>(grid2mesh.size());
  out.grid2mesh_mesh_in =
      summarize_degrees(count_degrees(mesh_count, grid2mesh, [](const GridMeshPair& e) { return e.mesh; }));
  out.grid2mesh_grid_out =
      summarize_degrees(count_degrees(grid_count, grid2mesh, [](const GridMeshPair& e) { return e.grid; }));

  report_progress("geometry: mesh2grid containing faces", 5, kSteps);
  const ContainingFaces located = containing_faces(grid_points, mesh.vertices, mesh.finest_faces());
  out.counts.mesh2grid_edges = 3 * static_cast<std::int64_t>(grid_count);
  out.grid_points_on_shared_boundary = located.points_on_shared_boundary;
  out.grid_points_in_no_face = located.points_in_no_face;
  std::vector<std::int64_t> mesh_out(mesh_count, 0);
  for (const std::uint32_t f : located.face) {
    const Face& face = mesh.finest_faces()[f];
    ++mesh_out[face.a];
    ++mesh_out[face.b];
    ++mesh_out[face.c];
  }
  out.mesh2grid_mesh_out = summarize_degrees(mesh_out);
  out.mesh2grid_grid_in = summarize_degrees(std::vector<std::int64_t>(grid_count, 3));
  return out;
}

GraphCounts compute_graph_counts(const GeometrySpec& spec) { return analyze_graph_geometry(spec).counts; }

}  // namespace actmem

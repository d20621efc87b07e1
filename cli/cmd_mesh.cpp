// `actmem mesh`: GraphCast's node and edge counts computed from the geometry,
// with how unevenly the edges fall on their receivers.
#include <fmt/format.h>

#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "actmem/geometry/graph_counts.h"
#include "actmem/geometry/icosahedral_mesh.h"
#include "actmem/geometry/lat_lon_grid.h"
#include "actmem/util/error.h"
#include "actmem/util/units.h"
#include "commands.h"
#include "progress_line.h"

namespace actmem::cli {
namespace {

nlohmann::json to_json(const DegreeStats& s) {
  return {{"nodes", s.nodes},          {"min", s.min}, {"mean", s.mean},
          {"median", s.median},        {"p99", s.p99}, {"max", s.max},
          {"zero_nodes", s.zero_nodes}};
}

nlohmann::json to_json(const GraphGeometry& g, double seconds) {
  return {
      {"resolution_deg", g.spec.resolution_deg},
      {"mesh_level", g.spec.mesh_level},
      {"radius_query_fraction", g.spec.radius_query_fraction},
      {"grid_nodes", g.counts.grid_nodes},
      {"mesh_nodes", g.counts.mesh_nodes},
      {"mesh_edges", g.counts.mesh_edges},
      {"grid2mesh_edges", g.counts.grid2mesh_edges},
      {"mesh2grid_edges", g.counts.mesh2grid_edges},
      {"longest_edge", g.longest_mesh_edge},
      {"radius", g.radius},
      {"in_degree",
       {{"grid2mesh", to_json(g.grid2mesh_mesh_in)},
        {"mesh_edges", to_json(g.mesh_in)},
        {"mesh2grid", to_json(g.mesh2grid_grid_in)}}},
      {"out_degree", {{"grid2mesh", to_json(g.grid2mesh_grid_out)}, {"mesh2grid", to_json(g.mesh2grid_mesh_out)}}},
      {"grid_points_on_shared_boundary", g.grid_points_on_shared_boundary},
      {"grid_points_in_no_face", g.grid_points_in_no_face},
      {"compute_time_s", seconds},
  };
}

std::string degree_row(std::string_view label, const DegreeStats& s) {
  return fmt::format("  {:<34} {:>6} {:>9.2f} {:>7} {:>6} {:>6} {:>8}\n", label, s.min, s.mean, s.median, s.p99, s.max,
                     s.zero_nodes);
}

void print_table(const GraphGeometry& g, double seconds) {
  std::cout << fmt::format("GraphCast graph at {}° resolution, mesh level {}, radius fraction {}\n",
                           g.spec.resolution_deg, g.spec.mesh_level, g.spec.radius_query_fraction);
  std::cout << fmt::format("longest finest-mesh edge {:.9f}, grid2mesh radius {:.9f} (unit sphere)\n\n",
                           g.longest_mesh_edge, g.radius);
  std::cout << fmt::format("  {:<18} {:>12}\n", "grid nodes", g.counts.grid_nodes)
            << fmt::format("  {:<18} {:>12}\n", "mesh nodes", g.counts.mesh_nodes)
            << fmt::format("  {:<18} {:>12}\n", "mesh edges", g.counts.mesh_edges)
            << fmt::format("  {:<18} {:>12}\n", "grid2mesh edges", g.counts.grid2mesh_edges)
            << fmt::format("  {:<18} {:>12}\n\n", "mesh2grid edges", g.counts.mesh2grid_edges);
  std::cout << fmt::format("  {:<34} {:>6} {:>9} {:>7} {:>6} {:>6} {:>8}\n", "degree", "min", "mean", "median", "p99",
                           "max", "zero");
  std::cout << degree_row("in:  mesh nodes from grid2mesh", g.grid2mesh_mesh_in)
            << degree_row("in:  mesh nodes from mesh edges", g.mesh_in)
            << degree_row("in:  grid nodes from mesh2grid", g.mesh2grid_grid_in)
            << degree_row("out: grid nodes into grid2mesh", g.grid2mesh_grid_out)
            << degree_row("out: mesh nodes into mesh2grid", g.mesh2grid_mesh_out);
  std::cout << fmt::format(
      "\ngrid points on a shared triangle edge or vertex: {} (given to the lowest-numbered face)\n",
      g.grid_points_on_shared_boundary);
  if (g.grid_points_in_no_face > 0)
    std::cout << fmt::format("grid points rounding left in no face: {} (given to the nearest)\n",
                             g.grid_points_in_no_face);
  std::cout << fmt::format("computed in {:.3f} s\n", seconds);
}

// `value`, or InputError(option, "", problem) when there is a problem.
double checked(double value, const std::string& problem, const char* option) {
  if (!problem.empty()) throw InputError(option, "", problem);
  return value;
}

int mesh_level(const std::string& text) {
  try {
    return static_cast<int>(parse_integer(text, "--mesh-level", 0, kMaxMeshLevel));
  } catch (const InputError&) {
    throw InputError("--mesh-level", "",
                     fmt::format("expected a mesh level from 0 to {}, got {}", kMaxMeshLevel, text));
  }
}

}  // namespace

int run_mesh(const Args& args) {
  CLI::App app{
      "Compute GraphCast's node and edge counts from the geometry: the icosahedral multi-mesh, the "
      "lat-lon grid and the grid2mesh / mesh2grid graphs (docs/geometry.md).",
      "mesh"};
  GeometrySpec spec;
  bool json = false;
  bool quiet = false;
  // Each value is checked as it is parsed, before the computation, which takes a while.
  app.add_option_function<double>(
         "--resolution", [&](double v) { spec.resolution_deg = checked(v, resolution_problem(v), "--resolution"); },
         fmt::format("grid resolution in degrees, at least {}; must divide 180 and 360", kMinResolutionDeg))
      ->default_str(fmt::format("{}", spec.resolution_deg));
  app.add_option_function<std::string>(
         "--mesh-level", [&](const std::string& v) { spec.mesh_level = mesh_level(v); },
         fmt::format("multi-mesh refinement level, 0..{}", kMaxMeshLevel))
      ->default_str(fmt::format("{}", spec.mesh_level));
  app.add_option_function<double>(
         "--radius-fraction",
         [&](double v) { spec.radius_query_fraction = checked(v, radius_fraction_problem(v), "--radius-fraction"); },
         "grid2mesh radius as a fraction of the longest finest-mesh edge, in (0, 2]")
      ->default_str(fmt::format("{}", spec.radius_query_fraction));
  app.add_flag("--json", json, "machine-readable output");
  add_quiet_option(app, quiet);
  parse(app, args);

  const auto start = std::chrono::steady_clock::now();
  GraphGeometry geometry;
  {
    const ProgressLine progress("actmem mesh", quiet);
    geometry = analyze_graph_geometry(spec);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (json)
    print_json(to_json(geometry, seconds));
  else
    print_table(geometry, seconds);
  return 0;
}

}  // namespace actmem::cli

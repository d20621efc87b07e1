#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "actmem/geometry/degree_stats.h"
#include "actmem/geometry/graph_counts.h"
#include "actmem/geometry/grid_mesh_connectivity.h"
#include "actmem/geometry/icosahedral_mesh.h"
#include "actmem/geometry/lat_lon_grid.h"
#include "actmem/util/error.h"

using namespace actmem;

namespace {

std::int64_t pow4(int r) { return std::int64_t{1} << (2 * r); }

// All-pairs reference for the radius query, testing mesh-to-grid distances
// (the opposite direction from the indexed code).
std::vector<GridMeshPair> brute_force_pairs(const std::vector<Vec3>& grid, const std::vector<Vec3f>& mesh,
                                            double radius) {
  std::vector<GridMeshPair> pairs;
  for (std::uint32_t g = 0; g < grid.size(); ++g)
    for (std::uint32_t m = 0; m < mesh.size(); ++m)
      if (squared_distance(widen(mesh[m]), grid[g]) <= radius * radius) pairs.push_back({g, m});
  return pairs;
}

template <class T>
std::vector<std::uint32_t> shuffled_order(const std::vector<T>& items, unsigned seed) {
  std::vector<std::uint32_t> order(items.size());
  for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::mt19937 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  return order;
}

}  // namespace

TEST_SUITE("geometry") {
  TEST_CASE("multi-mesh: every level 0..7 has the closed-form vertex, face and edge counts") {
    for (int level = 0; level <= 7; ++level) {
      CAPTURE(level);
      const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(level);
      CHECK(static_cast<std::int64_t>(mesh.vertices.size()) == 10 * pow4(level) + 2);
      CHECK(static_cast<std::int64_t>(mesh.vertices.size()) == mesh_vertex_count(level));
      REQUIRE(mesh.level() == level);
      std::int64_t edges = 0;
      for (int r = 0; r <= level; ++r) {
        CHECK(static_cast<std::int64_t>(mesh.faces_by_level[static_cast<std::size_t>(r)].size()) == 20 * pow4(r));
        edges += 60 * pow4(r);
      }
      CHECK(static_cast<std::int64_t>(multimesh_edges(mesh).size()) == edges);
      CHECK(multimesh_directed_edge_count(level) == edges);
      CHECK(mesh_face_count(level) == 20 * pow4(level));
    }
    CHECK(mesh_vertex_count(6) == 40962);
    CHECK(multimesh_directed_edge_count(6) == 327660);
  }

  TEST_CASE("multi-mesh: every level is a closed oriented surface with V - E + F = 2") {
    const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(5);
    for (int r = 0; r <= 5; ++r) {
      CAPTURE(r);
      const auto& faces = mesh.faces_by_level[static_cast<std::size_t>(r)];
      std::set<std::pair<std::uint32_t, std::uint32_t>> directed;
      std::set<std::uint32_t> used;
      for (const Face& f : faces) {
        for (const auto& [u, v] : {std::pair{f.a, f.b}, std::pair{f.b, f.c}, std::pair{f.c, f.a}}) {
          CHECK(directed.insert({u, v}).second);  // each directed edge in one face only
          used.insert(u);
        }
      }
      for (const auto& [u, v] : directed) CHECK(directed.count({v, u}) == 1);  // closed: the reverse is there
      const auto vertices = static_cast<std::int64_t>(used.size());
      const auto edges = static_cast<std::int64_t>(directed.size() / 2);
      const auto face_count = static_cast<std::int64_t>(faces.size());
      CHECK(vertices == mesh_vertex_count(r));
      CHECK(*used.rbegin() == mesh_vertex_count(r) - 1);  // coarse vertices are a prefix
      CHECK(vertices - edges + face_count == 2);
    }
  }

  TEST_CASE("multi-mesh: all vertices are unit length and faces are counter-clockwise seen from outside") {
    const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(7);
    for (const Vec3f& v : mesh.vertices) {
      const Vec3 w = widen(v);
      REQUIRE(std::abs(std::sqrt(dot(w, w)) - 1) <= 2e-7);
    }
    for (const auto& faces : mesh.faces_by_level) {
      for (const Face& f : faces) {
        const Vec3 a = widen(mesh.vertices[f.a]), b = widen(mesh.vertices[f.b]), c = widen(mesh.vertices[f.c]);
        REQUIRE(dot(cross(b - a, c - a), a) > 0);
      }
    }
  }

  TEST_CASE("multi-mesh: vertices are rounded and oriented exactly as the reference code does") {
    // Float32 values from graphcast/icosahedral_mesh.py (numpy 1.24).
    const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(6);
    struct Case {
      std::size_t index;
      Vec3f expected;
    };
    const Case cases[] = {
        {0, {0x1.f6e91p-2f, 0x1.b3888p-1f, 0x1.80307ap-3f}},
        {1, {-0x1.36d0d4p-2f, 0x1.0d2cap-1f, 0x1.96dcf2p-1f}},
        {11, {-0x1.36d0d4p-1f, 0.0f, -0x1.96dcf2p-1f}},
        {12, {0x1.c3a446p-4f, 0x1.9e377cp-1f, 0x1.279a74p-1f}},
        {40961, {-0x1.7c939ap-1f, 0x1.2b86e4p-1f, 0x1.4c33p-2f}},
    };
    for (const Case& c : cases) {
      CAPTURE(c.index);
      CHECK(mesh.vertices[c.index].x == c.expected.x);
      CHECK(mesh.vertices[c.index].y == c.expected.y);
      CHECK(mesh.vertices[c.index].z == c.expected.z);
    }
    CHECK(longest_finest_edge(mesh) == static_cast<double>(0.020673098f));
    // The poles are face centres, not vertices.
    for (const Vec3& pole : {Vec3{0, 0, 1}, Vec3{0, 0, -1}}) {
      int containing = 0;
      for (const Face& f : mesh.faces_by_level[0]) containing += contains(spherical_triangle(mesh.vertices, f), pole);
      CHECK(containing == 1);
    }
  }

  TEST_CASE("grid: 0.25 degrees has 721 x 1440 points from the south pole, longitude 0 first") {
    const LatLonGrid grid(0.25);
    CHECK(grid.latitude_count() == 721);
    CHECK(grid.longitude_count() == 1440);
    CHECK(grid.size() == 1038240);
    CHECK(grid.latitude_deg(0) == -90);
    CHECK(grid.latitude_deg(720) == 90);
    CHECK(grid.longitude_deg(1439) == 359.75);
    const std::vector<Vec3> points = grid.points();
    REQUIRE(points.size() == 1038240);
    CHECK(points[0].z == -1);
    CHECK(points[1440 * 360].x == doctest::Approx(1));        // equator, longitude 0
    CHECK(points[1440 * 360 + 360].y == doctest::Approx(1));  // equator, longitude 90
    CHECK(points.back().z == 1);
  }

  TEST_CASE("counts at 0.25 degrees and level 6 reproduce GraphCast's") {
    const GraphCounts at_checkpoint = compute_graph_counts({0.25, 6, 0.5999912857713345});
    CHECK(at_checkpoint.grid_nodes == 1038240);
    CHECK(at_checkpoint.mesh_nodes == 40962);
    CHECK(at_checkpoint.mesh_edges == 327660);
    CHECK(at_checkpoint.mesh2grid_edges == 3114720);
    // scipy's cKDTree on the reference's float32 vertices gives exactly these.
    CHECK(at_checkpoint.grid2mesh_edges == 1618748);
    CHECK(std::abs(at_checkpoint.grid2mesh_edges - 1618746) <= 1618746 / 10000);  // the paper, within 0.01%
    const GraphGeometry at_06 = analyze_graph_geometry({0.25, 6, 0.6});
    CHECK(at_06.counts.grid2mesh_edges == 1618824);
    CHECK(at_06.grid_points_in_no_face == 0);
    CHECK(at_06.mesh2grid_grid_in.min == 3);
    CHECK(at_06.mesh2grid_grid_in.max == 3);
    CHECK(at_06.mesh_in.edges == 327660);
    CHECK(at_06.grid2mesh_mesh_in.edges == 1618824);
    CHECK(at_06.grid2mesh_grid_out.edges == 1618824);
    CHECK(at_06.mesh2grid_mesh_out.edges == 3114720);
  }

  TEST_CASE("counts at 1 degree and level 5 (GraphCast_small)") {
    const GraphCounts counts = compute_graph_counts({1.0, 5, 0.6});
    CHECK(counts.grid_nodes == 65160);
    CHECK(counts.mesh_nodes == 10242);
    CHECK(counts.mesh_edges == 81900);
    CHECK(counts.grid2mesh_edges == 101892);
    CHECK(counts.mesh2grid_edges == 195480);
  }

  TEST_CASE("grid2mesh: the indexed query equals an all-pairs search from the other side at several radii") {
    const std::vector<Vec3> grid = LatLonGrid(5.0).points();
    const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(2);
    const double edge = longest_finest_edge(mesh);
    for (const double fraction : {0.1, 0.3, 0.6, 1.0, 1.5, 2.0}) {
      CAPTURE(fraction);
      const auto indexed = radius_query_pairs(grid, mesh.vertices, fraction * edge);
      const auto brute = brute_force_pairs(grid, mesh.vertices, fraction * edge);
      CHECK(indexed.size() == brute.size());
      CHECK(indexed == brute);  // both in (grid, mesh) order
    }
  }

  TEST_CASE("grid2mesh: counts do not depend on the order of grid points or mesh vertices") {
    const std::vector<Vec3> grid = LatLonGrid(1.0).points();
    const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(4);
    const double radius = 0.6 * longest_finest_edge(mesh);
    const auto pairs = radius_query_pairs(grid, mesh.vertices, radius);

    const auto grid_order = shuffled_order(grid, 1);
    const auto mesh_order = shuffled_order(mesh.vertices, 2);
    std::vector<Vec3> shuffled_grid;
    std::vector<Vec3f> shuffled_mesh;
    for (const std::uint32_t i : grid_order) shuffled_grid.push_back(grid[i]);
    for (const std::uint32_t i : mesh_order) shuffled_mesh.push_back(mesh.vertices[i]);
    auto shuffled_pairs = radius_query_pairs(shuffled_grid, shuffled_mesh, radius);
    REQUIRE(shuffled_pairs.size() == pairs.size());
    for (GridMeshPair& p : shuffled_pairs) p = {grid_order[p.grid], mesh_order[p.mesh]};
    std::sort(shuffled_pairs.begin(), shuffled_pairs.end(), [](const GridMeshPair& x, const GridMeshPair& y) {
      return std::pair{x.grid, x.mesh} < std::pair{y.grid, y.mesh};
    });
    CHECK(shuffled_pairs == pairs);
  }

  TEST_CASE("mesh2grid: each grid point gets the lowest-numbered finest face that contains it") {
    const std::vector<Vec3> grid = LatLonGrid(5.0).points();
    const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(3);
    const auto& faces = mesh.finest_faces();
    const ContainingFaces located = containing_faces(grid, mesh.vertices, faces);
    REQUIRE(located.face.size() == grid.size());
    CHECK(located.points_in_no_face == 0);
    std::int64_t shared = 0;
    for (std::size_t g = 0; g < grid.size(); ++g) {
      CAPTURE(g);
      std::vector<std::uint32_t> containing;
      for (std::uint32_t f = 0; f < faces.size(); ++f)
        if (contains(spherical_triangle(mesh.vertices, faces[f]), grid[g])) containing.push_back(f);
      REQUIRE(!containing.empty());
      CHECK(located.face[g] == containing.front());
      shared += containing.size() > 1;
    }
    CHECK(located.points_on_shared_boundary == shared);
    CHECK(shared > 0);  // longitude 0 runs along mesh edges: ties do occur
  }

  TEST_CASE("mesh2grid: at 0.25 degrees every grid point lies inside or on its face, whatever the face order") {
    const std::vector<Vec3> grid = LatLonGrid(0.25).points();
    const IcosahedralMultiMesh mesh = build_icosahedral_multimesh(6);
    std::vector<Face> faces = mesh.finest_faces();
    std::mt19937 rng(3);
    std::shuffle(faces.begin(), faces.end(), rng);
    const ContainingFaces located = containing_faces(grid, mesh.vertices, faces);
    CHECK(located.points_in_no_face == 0);
    std::int64_t outside = 0;
    for (std::size_t g = 0; g < grid.size(); ++g)
      outside += !contains(spherical_triangle(mesh.vertices, faces[located.face[g]]), grid[g]);
    CHECK(outside == 0);
  }

  TEST_CASE("degree statistics: min, mean, nearest-rank percentiles, max and zero-degree nodes") {
    std::vector<std::int64_t> degrees{0, 3, 1, 4, 1, 5, 9, 2, 6, 5};
    const DegreeStats s = summarize_degrees(degrees);
    CHECK(s.nodes == 10);
    CHECK(s.edges == 36);
    CHECK(s.min == 0);
    CHECK(s.max == 9);
    CHECK(s.mean == doctest::Approx(3.6));
    CHECK(s.median == 3);  // sorted 0 1 1 2 3 | 4 5 5 6 9: the 5th value
    CHECK(s.p99 == 9);
    CHECK(s.zero_nodes == 1);
    CHECK(summarize_degrees({}).nodes == 0);
  }

  TEST_CASE("bad geometry is an InputError naming the option and the value") {
    CHECK_THROWS_WITH_AS(compute_graph_counts({0.7, 6, 0.6}),
                         "resolution_deg: expected a resolution in degrees of at least 0.25 that divides 180 and 360, "
                         "got 0.7",
                         InputError);
    CHECK_THROWS_WITH_AS(compute_graph_counts({0.25, 9, 0.6}), "mesh_level: expected a mesh level from 0 to 8, got 9",
                         InputError);
    CHECK_THROWS_WITH_AS(compute_graph_counts({0.25, 6, 2.5}),
                         "radius_query_fraction: expected a radius fraction greater than 0 and at most 2, got 2.5",
                         InputError);
    for (const double bad : {0.0, -1.0, 0.01, 0.05, 0.1, 0.7, 7.0, 360.0, std::nan(""), HUGE_VAL}) {
      CAPTURE(bad);
      CHECK_FALSE(resolution_problem(bad).empty());
    }
    for (const double good : {0.25, 0.5, 1.0, 1.5, 2.0, 180.0}) {
      CAPTURE(good);
      CHECK(resolution_problem(good).empty());
    }
    for (const int bad : {-1, 9, 11}) CHECK_FALSE(mesh_level_problem(bad).empty());
    for (const double bad : {0.0, -0.1, 2.0001, std::nan("")}) CHECK_FALSE(radius_fraction_problem(bad).empty());
    CHECK(radius_fraction_problem(2.0).empty());
  }
}

// actmem/util/progress.h: the calling thread's observer hears a long
// computation's steps; scopes nest; other threads hear nothing.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include "actmem/geometry/graph_counts.h"
#include "actmem/util/progress.h"

using namespace actmem;

TEST_CASE("geometry reports its steps to the calling thread's observer only") {
  std::vector<std::string> heard, outer;
  {
    const ScopedProgressObserver outer_scope([&](std::string_view what, int, int) { outer.emplace_back(what); });
    {
      const ScopedProgressObserver scope([&](std::string_view what, int step, int steps) {
        heard.push_back(std::string(what) + " " + std::to_string(step) + "/" + std::to_string(steps));
      });
      GeometrySpec spec;
      spec.resolution_deg = 5;
      spec.mesh_level = 2;
      analyze_graph_geometry(spec);
      std::thread([&] { analyze_graph_geometry(spec); }).join();  // another thread: not heard
    }
    report_progress("after the inner scope", 1, 1);
  }
  report_progress("with no observer", 1, 1);
  CHECK(heard == std::vector<std::string>{"geometry: icosahedral multi-mesh 1/5", "geometry: lat-lon grid 2/5",
                                          "geometry: mesh edges 3/5", "geometry: grid2mesh radius query 4/5",
                                          "geometry: mesh2grid containing faces 5/5"});
  CHECK(outer == std::vector<std::string>{"after the inner scope"});
}

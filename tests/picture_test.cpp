// The pieces of `actmem report` (picture/): SVG text, scales, the timeline's
// columns and bands, and that every figure drawn is the library's.
#include <doctest/doctest.h>

#include <algorithm>
#include <regex>
#include <string>

#include "actmem/plan/exports.h"
#include "actmem/simulate/simulator.h"
#include "actmem/util/units.h"
#include "axes.h"
#include "catalog_view.h"
#include "html_report.h"
#include "pareto_view.h"
#include "plan_view.h"
#include "report_figures.h"
#include "svg.h"
#include "test_models.h"
#include "timeline_view.h"

using namespace actmem;
using namespace actmem::picture;

namespace {

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

CostGraph tiny_graph(std::int64_t processor_steps = 4) {
  RunOptions run;
  run.framework = Framework::pytorch;
  return CostGraph::build(testing::tiny_model(processor_steps), run);
}

// A plan with a nested region and blocked edges, on the tiny model's 7 stages.
Plan nested_plan(const CostGraph& g) {
  Plan p = empty_plan(g.stages());
  p.checkpoints = {{0, 0, {}}, {2, 5, {{3, 4, {}}}}};
  p.edge_blocks.front() = 4;
  p.edge_blocks.back() = 64;
  return p;
}

const ReportFigures& tiny_figures() {
  static const ReportFigures figures = [] {
    const CostGraph g = tiny_graph();
    const Device device = load_device("a100-40gb");
    ReportFigures f = gather_figures(g, device, 3 * kMiB, nested_plan(g), "test", SolverOptions{});
    f.subtitle = "tiny";
    return f;
  }();
  return figures;
}

}  // namespace

TEST_SUITE("picture") {
  TEST_CASE("SVG text is escaped and coordinates are rounded to 0.1") {
    CHECK(escape_xml(R"(a<b & "c">'d')") == "a&lt;b &amp; &quot;c&quot;&gt;&#39;d&#39;");
    CHECK(px(12.04) == "12");
    CHECK(px(12.06) == "12.1");
    CHECK(px(-0.01) == "0");
    CHECK(px(-3.25) == "-3.3");  // (rounded half away from zero)
    SvgWriter svg(10, 20, {{"id", "x"}});
    svg.open("g", {{"class", "a&b"}}, "tip<");
    svg.element("rect", {{"width", "1"}});
    svg.text(1, 2, "<hi>");
    const std::string out = svg.finish(true);
    CHECK(out.starts_with("<?xml"));
    CHECK(out.find(R"(<g class="a&amp;b"><title>tip&lt;</title>)") != std::string::npos);
    CHECK(out.find(R"(<text x="1" y="2">&lt;hi&gt;</text>)") != std::string::npos);
    CHECK(out.ends_with("</g>\n</svg>\n"));
  }

  TEST_CASE("scales map values to pixels, ticks are round numbers within the range") {
    const Scale y = Scale::linear(0, 40, 300, 100);
    CHECK(y(0) == doctest::Approx(300));
    CHECK(y(40) == doctest::Approx(100));
    CHECK(y.ticks(5) == std::vector<double>{0, 10, 20, 30, 40});
    const Scale x = Scale::logarithmic(10, 1000, 0, 200);
    CHECK(x(100) == doctest::Approx(100));
    CHECK(x.ticks(7) == std::vector<double>{10, 20, 50, 100, 200, 500, 1000});
    CHECK(x.ticks(6) == std::vector<double>{10, 100, 1000});
    CHECK(Scale::logarithmic(22, 108, 0, 1).ticks(12) == std::vector<double>{30, 40, 50, 60, 70, 80, 90, 100});
  }

  TEST_CASE("timeline columns cover every op and keep the peak exactly") {
    const CostGraph g = tiny_graph();
    SimulationOptions options;
    options.record_timeline = true;
    const Device device = load_device("a100-40gb");
    Report r = simulate(g, device, device.memory_bytes, nested_plan(g), options);
    REQUIRE(r.timeline.size() > 100);
    // Here the peak is a transient inside an op: no row reaches it, the drawn row does.
    std::int64_t highest_row = 0;
    for (const TimelinePoint& p : r.timeline) highest_row = std::max(highest_row, p.live.total());
    CHECK(highest_row < r.peak_bytes);
    r.timeline = drawn_points(r);
    for (const std::size_t width : {std::size_t{7}, std::size_t{100}, r.timeline.size() + 5}) {
      const auto columns = timeline_columns(r.timeline, width);
      CHECK(columns.size() == std::min(width, r.timeline.size()));
      CHECK(columns.front().first == 0);
      CHECK(columns.back().last == r.timeline.size());
      std::int64_t highest = 0;
      for (std::size_t c = 0; c < columns.size(); ++c) {
        if (c > 0) CHECK(columns[c].first == columns[c - 1].last);
        for (std::size_t i = columns[c].first; i < columns[c].last; ++i)
          CHECK(r.timeline[i].live.total() <= r.timeline[columns[c].shown].live.total());
        highest = std::max(highest, r.timeline[columns[c].shown].live.total());
      }
      CHECK(highest == r.peak_bytes);
    }
    CHECK(r.timeline[peak_index(r.timeline)].live.total() == r.peak_bytes);
    CHECK(r.timeline[peak_index(r.timeline)].at.op == r.peak_at.op);

    // Bands partition the timeline into runs of one pass and stage.
    const auto bands = stage_bands(r.timeline);
    CHECK(bands.front().first == 0);
    CHECK(bands.back().last == r.timeline.size());
    for (std::size_t b = 1; b < bands.size(); ++b) {
      CHECK(bands[b].first == bands[b - 1].last);
      CHECK((bands[b].at.pass != bands[b - 1].at.pass || bands[b].at.stage != bands[b - 1].at.stage));
    }
    CHECK(short_stage_name("processor.12") == "p12");
    CHECK(short_stage_name("mesh_edge_embed") == "embed");
  }

  TEST_CASE("the timeline picture shows the report's peak, budget and every kind") {
    const ReportFigures& f = tiny_figures();
    const std::string svg = timeline_svg(f.report, "tiny", true);
    CHECK(svg.starts_with("<?xml"));
    CHECK(svg.find("data-peak-bytes=\"" + std::to_string(f.report.peak_bytes) + "\"") != std::string::npos);
    CHECK(svg.find("data-budget-bytes=\"" + std::to_string(f.report.budget_bytes) + "\"") != std::string::npos);
    CHECK(svg.find(">peak " + format_bytes(f.report.peak_bytes) + "</text>") != std::string::npos);
    CHECK(svg.find(">budget " + format_bytes(f.report.budget_bytes) + "</text>") != std::string::npos);
    CHECK(svg.find("data-op=\"" + f.report.peak_at.op + "\"") != std::string::npos);
    CHECK(count(svg, "<polygon class=\"kind\"") == 7);
    CHECK(svg.find("backward, with recomputation") != std::string::npos);
  }

  TEST_CASE("thousands of stage runs are drawn merged, at least 2 px each") {
    const CostGraph g = tiny_graph();
    Plan p = nested_plan(g);
    p.checkpoints.push_back({6, 6, {}});  // the decoder recomputed block by block: recompute and backward alternate
    p.edge_blocks.front() = 1024;         // and the encoder; 1024 blocks is a plan's most (actmem/util/limits.h)
    p.edge_blocks.back() = 1024;
    SimulationOptions options;
    options.record_timeline = true;
    const Device device = load_device("a100-40gb");
    const Report r = simulate(g, device, device.memory_bytes, p, options);
    REQUIRE(stage_bands(r.timeline).size() > 4000);
    const std::string svg = timeline_svg(r, "many bands");
    CHECK(count(svg, "<rect class=\"band\"") <= 1010 / 2 + 1);
    CHECK(svg.find("stage runs, ops") != std::string::npos);
  }

  TEST_CASE("the figures are the library's: plan, frontier, marks, exports, catalog") {
    const ReportFigures& f = tiny_figures();
    const CostGraph g = tiny_graph();
    const Device device = load_device("a100-40gb");
    const std::int64_t budget = 3 * kMiB;
    const Report r = simulate(g, device, budget, f.plan);
    CHECK(f.report.peak_bytes == r.peak_bytes);
    CHECK(f.report.step_time_s == r.step_time_s);
    CHECK(to_json(f.report) == to_json(r));

    const auto frontier = pareto_frontier(g, device);
    REQUIRE(f.frontier.size() == frontier.size());
    for (std::size_t i = 0; i < frontier.size(); ++i) {
      CHECK(f.frontier[i].plan == frontier[i].plan);
      CHECK(f.frontier[i].report.peak_bytes == frontier[i].report.peak_bytes);
      CHECK(f.frontier[i].report.fits == (frontier[i].report.peak_bytes <= budget));
    }

    const nlohmann::json exports = trainer_exports(g, device, budget, f.plan, r);
    CHECK(f.exports == exports);
    std::vector<std::string> keys;
    for (const MarkedPlan& m : f.marks) keys.push_back(m.key);
    CHECK(keys == std::vector<std::string>{"chosen", "none", "full", "deepmind_deep_gnn", "physicsnemo", "anemoi"});
    CHECK(f.marks[0].peak_bytes == r.peak_bytes);
    CHECK(f.marks[1].peak_bytes == simulate(g, device, budget, empty_plan(g.stages())).peak_bytes);
    CHECK(f.marks[3].peak_bytes == exports["deepmind_deep_gnn"]["predicted"]["peak_bytes"].get<std::int64_t>());
    CHECK(f.marks[3].step_time_s == exports["deepmind_deep_gnn"]["predicted"]["step_time_s"].get<double>());

    REQUIRE(f.catalog.size() == device_catalog().size());
    for (const CatalogEntry& e : f.catalog) {
      const FitAnswer a = fits(g, e.device);
      CHECK(e.answer.fits == a.fits);
      CHECK(e.answer.peak_bytes == a.peak_bytes);
      CHECK(e.answer.min_peak_bytes == a.min_peak_bytes);
      CHECK(e.is_target == (e.device.id == "a100-40gb"));
    }
  }

  TEST_CASE("the Pareto and catalog pictures carry the figures they draw") {
    const ReportFigures& f = tiny_figures();
    const std::string pareto = pareto_svg(f);
    CHECK(count(pareto, "<circle class=\"point\"") == f.frontier.size());
    for (const MarkedPlan& m : f.marks) {
      CHECK(pareto.find("data-key=\"" + m.key + "\" data-peak-bytes=\"" + std::to_string(m.peak_bytes) + "\"") !=
            std::string::npos);
      CHECK(pareto.find(m.label + ": " + format_bytes(m.peak_bytes) + ", " + format_seconds(m.step_time_s)) !=
            std::string::npos);
    }
    const std::string catalog = catalog_svg(f);
    CHECK(count(catalog, "<g class=\"device\"") == f.catalog.size());
    for (const CatalogEntry& e : f.catalog)
      CHECK(catalog.find("data-device=\"" + e.device.id + "\" data-fits=\"" + (e.answer.fits ? "true" : "false") +
                         "\" data-peak-bytes=\"" + std::to_string(e.answer.peak_bytes) + "\"") != std::string::npos);
  }

  TEST_CASE("the plan picture draws each region as a bracket and each block boundary as a tick") {
    const ReportFigures& f = tiny_figures();
    const std::string svg = plan_svg(f);
    CHECK(count(svg, "<g class=\"stage\"") == f.stages.size());
    CHECK(count(svg, "class=\"region\"") == 2);
    CHECK(count(svg, "class=\"region inner\"") == 1);
    CHECK(svg.find(R"(data-from="processor.1" data-to="processor.2")") != std::string::npos);
    CHECK(count(svg, "class=\"block-tick\"") == (4 - 1) + (32 - 1));  // 64 blocks drawn as 32
    CHECK(svg.find(">×64</text>") != std::string::npos);
  }

  TEST_CASE("the HTML report holds the four pictures, the exports and its figures, and no script to run") {
    const ReportFigures& f = tiny_figures();
    const std::string html = html_report(f);
    for (const char* id : {"id=\"timeline\"", "id=\"pareto\"", "id=\"catalog\"", "id=\"plan\""})
      CHECK(count(html, id) == 1);
    CHECK(count(html, "<tr data-trainer=") == 6);
    CHECK(count(html, "<script") == 1);
    CHECK(html.find("<script type=\"application/json\" id=\"actmem-figures\">") != std::string::npos);
    CHECK(html.find("http://") == html.find("http://www.w3.org/2000/svg"));  // nothing fetched
    const nlohmann::json j = figures_json(f);
    nlohmann::json expected = to_json(f.report);
    expected["plan"] = plan_to_json(f.plan, f.stages);
    CHECK(j["simulate"] == expected);
    CHECK(j["catalog"].size() == f.catalog.size());
    CHECK(j["frontier"].size() == f.frontier.size());
  }
}

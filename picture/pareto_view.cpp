#include "pareto_view.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "actmem/util/units.h"
#include "axes.h"
#include "memory_kinds.h"
#include "svg.h"

namespace actmem::picture {
namespace {

constexpr double kWidth = 1120, kHeight = 440;
const Frame kFrame{80, 56, 800, 320};

struct MarkStyle {
  std::string_view shape;  // circle, square, diamond, triangle
  std::string_view color;
};

MarkStyle style_of(const std::string& key) {
  if (key == "chosen") return {"circle", kFits};
  if (key == "none") return {"square", "#444444"};
  if (key == "full") return {"diamond", "#444444"};
  if (key == "deepmind_deep_gnn") return {"triangle", "#0072b2"};
  if (key == "physicsnemo") return {"triangle", "#cc79a7"};
  return {"triangle", "#e69f00"};
}

// Seconds or milliseconds, whichever reads better for times up to `longest`.
struct TimeUnit {
  double per_second;
  std::string_view name;
};
TimeUnit time_unit(double longest) { return longest >= 1.0 ? TimeUnit{1.0, "s"} : TimeUnit{1e3, "ms"}; }

void draw_marker(SvgWriter& svg, const MarkStyle& style, double x, double y, double size, const Attributes& extra,
                 std::string_view title) {
  Attributes a = extra;
  a.emplace_back("fill", std::string(style.color));
  a.emplace_back("stroke", "#ffffff");
  a.emplace_back("stroke-width", "1.5");
  if (style.shape == "circle") {
    a.insert(a.begin(), {{"cx", px(x)}, {"cy", px(y)}, {"r", px(size)}});
    svg.element("circle", a, title);
    return;
  }
  std::string points;
  if (style.shape == "square")
    points = fmt::format("{},{} {},{} {},{} {},{}", px(x - size), px(y - size), px(x + size), px(y - size),
                         px(x + size), px(y + size), px(x - size), px(y + size));
  else if (style.shape == "diamond")
    points = fmt::format("{},{} {},{} {},{} {},{}", px(x), px(y - size * 1.3), px(x + size * 1.3), px(y), px(x),
                         px(y + size * 1.3), px(x - size * 1.3), px(y));
  else
    points = fmt::format("{},{} {},{} {},{}", px(x), px(y - size * 1.3), px(x + size * 1.2), px(y + size),
                         px(x - size * 1.2), px(y + size));
  a.insert(a.begin(), {"points", points});
  svg.element("polygon", a, title);
}

void draw_frontier(SvgWriter& svg, const ReportFigures& f, const Scale& x, const Scale& y, const TimeUnit& unit) {
  svg.open("g", {{"class", "frontier"}});
  std::string staircase;
  for (std::size_t i = 0; i < f.frontier.size(); ++i) {
    const Report& r = f.frontier[i].report;
    if (i > 0)
      staircase += fmt::format("{},{} ", px(x(gib(r.peak_bytes))),
                               px(y(f.frontier[i - 1].report.step_time_s * unit.per_second)));
    staircase += fmt::format("{},{} ", px(x(gib(r.peak_bytes))), px(y(r.step_time_s * unit.per_second)));
  }
  svg.element("polyline", {{"points", staircase}, {"fill", "none"}, {"stroke", "#888888"}, {"stroke-width", "1.5"}});
  for (const ParetoPoint& p : f.frontier) {
    const Report& r = p.report;
    svg.element("circle",
                {{"class", "point"},
                 {"cx", px(x(gib(r.peak_bytes)))},
                 {"cy", px(y(r.step_time_s * unit.per_second))},
                 {"r", "3.5"},
                 {"fill", r.fits ? "#555555" : "#bbbbbb"},
                 {"data-peak-bytes", std::to_string(r.peak_bytes)},
                 {"data-step-time-s", fmt::format("{}", r.step_time_s)}},
                fmt::format("{}: peak {}, step {}", describe(p.plan, f.stages), format_bytes(r.peak_bytes),
                            format_seconds(r.step_time_s)));
  }
  svg.close();
}

void draw_budget(SvgWriter& svg, const ReportFigures& f, const Scale& x) {
  const double at = std::clamp(x(gib(f.budget_bytes)), kFrame.left, kFrame.right());
  svg.open("g", {{"class", "budget"}, {"data-bytes", std::to_string(f.budget_bytes)}});
  svg.element("rect", {{"x", px(at)},
                       {"y", px(kFrame.top)},
                       {"width", px(kFrame.right() - at)},
                       {"height", px(kFrame.height)},
                       {"fill", std::string(kBudget)},
                       {"fill-opacity", "0.06"}});
  svg.element("line", {{"x1", px(at)},
                       {"x2", px(at)},
                       {"y1", px(kFrame.top)},
                       {"y2", px(kFrame.bottom())},
                       {"stroke", std::string(kBudget)},
                       {"stroke-width", "1.5"},
                       {"stroke-dasharray", "6 4"}});
  svg.text(at + 6, kFrame.top + 14, "budget " + format_bytes(f.budget_bytes) + ": plans to the right do not fit",
           {{"font-size", "12"}, {"fill", std::string(kBudget)}, {"font-weight", "600"}});
  svg.close();
}

// The marks with labels beside them, nudged apart vertically.
void draw_marks(SvgWriter& svg, const ReportFigures& f, const Scale& x, const Scale& y, const TimeUnit& unit) {
  struct Placed {
    const MarkedPlan* mark;
    double x, y, label_y;
  };
  std::vector<Placed> placed;
  for (const MarkedPlan& m : f.marks)
    placed.push_back({&m, x(gib(m.peak_bytes)), y(m.step_time_s * unit.per_second), 0});
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) { return a.y < b.y; });
  double last = -1e9;
  for (Placed& p : placed) {
    p.label_y = std::max(p.y + 4, last + 15);
    last = p.label_y;
  }
  svg.open("g", {{"class", "marks"}, {"font-size", "12"}});
  for (const Placed& p : placed) {
    const MarkedPlan& m = *p.mark;
    const MarkStyle style = style_of(m.key);
    const std::string text =
        fmt::format("{}: {}, {}", m.label, format_bytes(m.peak_bytes), format_seconds(m.step_time_s));
    draw_marker(svg, style, p.x, p.y, m.key == "chosen" ? 7 : 5.5,
                {{"class", "mark"},
                 {"data-key", m.key},
                 {"data-peak-bytes", std::to_string(m.peak_bytes)},
                 {"data-step-time-s", fmt::format("{}", m.step_time_s)}},
                text);
    const bool left = p.x > kFrame.left + kFrame.width * 0.62;
    const double tx = left ? p.x - 12 : p.x + 12;
    if (std::abs(p.label_y - 4 - p.y) > 2)
      svg.element("line", {{"x1", px(p.x)},
                           {"y1", px(p.y)},
                           {"x2", px(tx)},
                           {"y2", px(p.label_y - 4)},
                           {"stroke", "#999999"},
                           {"stroke-width", "0.75"}});
    svg.text(tx, p.label_y, text,
             {{"text-anchor", left ? "end" : "start"},
              {"fill", std::string(kInk)},
              {"font-weight", m.key == "chosen" ? "700" : "400"}});
  }
  svg.close();
}

void draw_legend(SvgWriter& svg, const ReportFigures& f) {
  svg.open("g", {{"class", "legend"}, {"font-size", "12"}, {"fill", std::string(kInk)}});
  double y = kFrame.top + 8;
  const double x = kFrame.right() + 30;
  svg.text(x, y, "marked", {{"font-weight", "600"}});
  for (const MarkedPlan& m : f.marks) {
    y += 20;
    draw_marker(svg, style_of(m.key), x + 6, y - 4, 5, {}, "");
    svg.text(x + 18, y, m.label + (m.fits ? "" : " (does not fit)"));
  }
  y += 28;
  svg.element("circle", {{"cx", px(x + 6)}, {"cy", px(y - 4)}, {"r", "3.5"}, {"fill", "#555555"}});
  svg.text(x + 18, y, "frontier plan (hover: plan)");
  y += 18;
  svg.text(x, y, fmt::format("{} plans on the frontier", f.frontier.size()), {{"fill", std::string(kMuted)}});
  svg.close();
}

}  // namespace

std::string pareto_svg(const ReportFigures& f) {
  double lo_bytes = static_cast<double>(f.budget_bytes), hi_bytes = lo_bytes, lo_time = 1e300, hi_time = 0;
  const auto extend = [&](std::int64_t bytes, double seconds) {
    lo_bytes = std::min(lo_bytes, static_cast<double>(bytes));
    hi_bytes = std::max(hi_bytes, static_cast<double>(bytes));
    lo_time = std::min(lo_time, seconds);
    hi_time = std::max(hi_time, seconds);
  };
  for (const ParetoPoint& p : f.frontier) extend(p.report.peak_bytes, p.report.step_time_s);
  for (const MarkedPlan& m : f.marks) extend(m.peak_bytes, m.step_time_s);
  const TimeUnit unit = time_unit(hi_time);
  const double pad = (hi_time - lo_time) * 0.08 + hi_time * 0.01;
  const Scale x = Scale::logarithmic(lo_bytes / static_cast<double>(kGiB) / 1.15,
                                     hi_bytes / static_cast<double>(kGiB) * 1.15, kFrame.left, kFrame.right());
  const Scale y =
      Scale::linear((lo_time - pad) * unit.per_second, (hi_time + pad) * unit.per_second, kFrame.bottom(), kFrame.top);

  SvgWriter svg(kWidth, kHeight,
                {{"id", "pareto"},
                 {"class", "actmem-view"},
                 {"font-family", std::string(kFont)},
                 {"role", "img"},
                 {"aria-label", "peak memory against step time"}});
  svg.element("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "#ffffff"}});
  chart_title(svg, kFrame.left, 24, "Peak memory against step time: what each plan costs");
  svg.text(kFrame.left, 44, "every plan not beaten on both (the Pareto frontier), and the plans compared with it",
           {{"font-size", "12"}, {"fill", std::string(kMuted)}});
  left_axis(svg, kFrame, y, y.ticks(6), {fmt::format("step time ({})", unit.name)});
  bottom_axis(svg, kFrame, x, x.ticks(12), {"peak memory (GiB, log scale)"});
  draw_budget(svg, f, x);
  draw_frontier(svg, f, x, y, unit);
  draw_marks(svg, f, x, y, unit);
  draw_legend(svg, f);
  return svg.finish();
}

}  // namespace actmem::picture

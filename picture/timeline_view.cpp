#include "timeline_view.h"

#include <algorithm>
#include <array>
#include <optional>
#include <stdexcept>

#include <fmt/format.h>

#include "actmem/util/units.h"
#include "axes.h"
#include "memory_kinds.h"
#include "svg.h"

namespace actmem::picture {
namespace {

constexpr double kWidth = 1120, kHeight = 500;
const Frame kFrame{72, 104, 1010, 290};
constexpr double kPhaseTop = 60, kStripTop = 76, kStripHeight = 20;

std::string_view pass_color(Pass pass) {
  switch (pass) {
    case Pass::forward: return "#cfe3f5";
    case Pass::recompute: return "#fcd9b8";
    case Pass::backward: return "#ddd3ef";
    case Pass::optimizer: return "#e0e0e0";
  }
  return "#e0e0e0";
}

std::string describe_location(const StepLocation& at) {
  std::string where = fmt::format("{} pass, {}", to_string(at.pass), at.stage);
  if (at.block >= 0) where += fmt::format(" block {}", at.block);
  return where + ", op " + at.op;
}

// An estimate of a label's width at `font_px`, for placing and fitting labels.
double text_width(std::string_view text, double font_px) { return 0.58 * font_px * static_cast<double>(text.size()); }

// Stage bands narrower than this many pixels are drawn merged with their
// neighbours (blocked edge updates alternate recompute and backward block
// by block: tens of thousands of bands at rollout 12).
constexpr double kNarrowestBand = 2.0;

// Consecutive bands merged until each is at least kNarrowestBand wide; a
// merged one takes the pass of most of its ops and keeps `count`.
struct StripSegment {
  StageBand band;
  std::size_t count = 1;  // bands merged into it
};

std::vector<StripSegment> strip_segments(const std::vector<StageBand>& bands, const Scale& x) {
  std::vector<StripSegment> segments;
  std::array<std::size_t, 4> ops_by_pass{};
  const auto dominant = [&] {
    return static_cast<Pass>(std::max_element(ops_by_pass.begin(), ops_by_pass.end()) - ops_by_pass.begin());
  };
  for (const StageBand& band : bands) {
    const bool open = !segments.empty() && x(static_cast<double>(segments.back().band.last)) -
                                                   x(static_cast<double>(segments.back().band.first)) <
                                               kNarrowestBand;
    if (!open) {
      segments.push_back({band, 1});
      ops_by_pass = {};
    } else {
      segments.back().band.last = band.last;
      ++segments.back().count;
    }
    ops_by_pass[static_cast<std::size_t>(band.at.pass)] += band.last - band.first;
    if (segments.back().count > 1) segments.back().band.at.pass = dominant();
  }
  return segments;
}

std::string segment_title(const StripSegment& s) {
  const StageBand& band = s.band;
  if (s.count > 1)
    return fmt::format("{} stage runs, ops {}–{} (mostly {})", s.count, band.first, band.last - 1,
                       to_string(band.at.pass));
  return fmt::format("{} pass, rollout step {}, {}: ops {}–{}", to_string(band.at.pass), band.at.step, band.at.stage,
                     band.first, band.last - 1);
}

// The stage strip above the plot: one band per stage run, coloured by pass,
// labelled when the label fits.
void draw_stage_strip(SvgWriter& svg, const std::vector<TimelinePoint>& points, const Scale& x) {
  svg.open("g", {{"class", "stages"}, {"font-size", "11"}, {"fill", std::string(kInk)}});
  for (const StripSegment& segment : strip_segments(stage_bands(points), x)) {
    const StageBand& band = segment.band;
    const double x0 = x(static_cast<double>(band.first)), x1 = x(static_cast<double>(band.last));
    const std::string title = segment_title(segment);
    svg.element("rect",
                {{"class", "band"},
                 {"x", px(x0)},
                 {"y", px(kStripTop)},
                 {"width", px(std::max(x1 - x0, 0.5))},
                 {"height", px(kStripHeight)},
                 {"fill", std::string(pass_color(band.at.pass))},
                 {"stroke", "#ffffff"},
                 {"stroke-width", "0.5"}},
                title);
    if (segment.count > 1) continue;
    for (const std::string& label : {band.at.stage, short_stage_name(band.at.stage)}) {
      if (text_width(label, 11) + 4 > x1 - x0) continue;
      svg.text((x0 + x1) / 2, kStripTop + 14, label, {{"text-anchor", "middle"}});
      break;
    }
  }
  svg.close();
}

// The forward pass, and the backward pass with its recomputation, named
// over the stage strip.
void draw_phases(SvgWriter& svg, const std::vector<TimelinePoint>& points, const Scale& x) {
  svg.open("g", {{"class", "phases"}, {"font-size", "12"}, {"fill", std::string(kInk)}});
  for (std::size_t first = 0; first < points.size();) {
    const bool forward = points[first].at.pass == Pass::forward;
    bool recomputes = false;
    std::size_t last = first;
    for (; last < points.size() && (points[last].at.pass == Pass::forward) == forward; ++last)
      recomputes = recomputes || points[last].at.pass == Pass::recompute;
    const double x0 = x(static_cast<double>(first)), x1 = x(static_cast<double>(last));
    const std::string label = forward ? "forward" : recomputes ? "backward, with recomputation" : "backward";
    svg.element("path", {{"d", fmt::format("M{} {} V{} H{} V{}", px(x0 + 1), px(kPhaseTop + 12), px(kPhaseTop + 8),
                                           px(x1 - 1), px(kPhaseTop + 12))},
                         {"fill", "none"},
                         {"stroke", std::string(kMuted)}});
    if (text_width(label, 12) + 8 < x1 - x0) svg.text((x0 + x1) / 2, kPhaseTop + 4, label, {{"text-anchor", "middle"}});
    first = last;
  }
  svg.close();
}

// "x,y x,y …" without the points that lie on a straight line between their
// neighbours (after rounding to what is drawn): flat runs become one segment.
std::string polygon_points(const std::vector<std::pair<double, double>>& points) {
  std::string out;
  const auto same = [](double a, double b) { return px(a) == px(b); };
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i > 0 && i + 1 < points.size()) {
      const auto& [x0, y0] = points[i - 1];
      const auto& [x1, y1] = points[i];
      const auto& [x2, y2] = points[i + 1];
      if ((same(y0, y1) && same(y1, y2)) || (same(x0, x1) && same(x1, x2))) continue;
    }
    out += fmt::format("{},{} ", px(points[i].first), px(points[i].second));
  }
  if (!out.empty()) out.pop_back();
  return out;
}

// The stacked areas, one polygon per kind, over the columns.
void draw_stack(SvgWriter& svg, const std::vector<TimelinePoint>& points, const std::vector<TimelineColumn>& columns,
                const Scale& x, const Scale& y, const Report& report) {
  svg.open("g", {{"class", "stack"}});
  std::vector<double> below(columns.size(), 0.0);
  for (const MemoryKind& kind : memory_kinds()) {
    std::vector<std::pair<double, double>> outline;  // the top edge left to right, the bottom edge back
    std::vector<double> above(columns.size());
    for (std::size_t c = 0; c < columns.size(); ++c) {
      above[c] = below[c] + gib(points[columns[c].shown].live.*kind.bytes);
      outline.emplace_back(x(static_cast<double>(columns[c].first)), y(above[c]));
      outline.emplace_back(x(static_cast<double>(columns[c].last)), y(above[c]));
    }
    for (std::size_t c = columns.size(); c-- > 0;) {
      outline.emplace_back(x(static_cast<double>(columns[c].last)), y(below[c]));
      outline.emplace_back(x(static_cast<double>(columns[c].first)), y(below[c]));
    }
    svg.element("polygon",
                {{"class", "kind"},
                 {"data-kind", std::string(kind.key)},
                 {"points", polygon_points(outline)},
                 {"fill", std::string(kind.color)}},
                fmt::format("{}: {} at the peak", kind.label, format_bytes(report.breakdown.*kind.bytes)));
    below = std::move(above);
  }
  svg.close();
}

void draw_budget(SvgWriter& svg, const Report& report, const Scale& y) {
  const double at = y(gib(report.budget_bytes));
  svg.open("g", {{"class", "budget"}, {"data-bytes", std::to_string(report.budget_bytes)}});
  svg.element("line", {{"x1", px(kFrame.left)},
                       {"x2", px(kFrame.right())},
                       {"y1", px(at)},
                       {"y2", px(at)},
                       {"stroke", std::string(kBudget)},
                       {"stroke-width", "1.5"},
                       {"stroke-dasharray", "6 4"}});
  svg.text(kFrame.right() - 4, at - 5, "budget " + format_bytes(report.budget_bytes),
           {{"text-anchor", "end"}, {"font-size", "12"}, {"fill", std::string(kBudget)}, {"font-weight", "600"}});
  svg.close();
}

void draw_peak(SvgWriter& svg, const Report& report, std::size_t index, const Scale& x, const Scale& y) {
  const double cx = x(static_cast<double>(index) + 0.5), cy = y(gib(report.peak_bytes));
  const std::string first = "peak " + format_bytes(report.peak_bytes);
  const std::string second = describe_location(report.peak_at);
  svg.open("g", {{"class", "peak"},
                 {"data-bytes", std::to_string(report.peak_bytes)},
                 {"data-index", std::to_string(index)},
                 {"data-pass", to_string(report.peak_at.pass)},
                 {"data-stage", report.peak_at.stage},
                 {"data-op", report.peak_at.op}});
  svg.element("line", {{"x1", px(cx)},
                       {"x2", px(cx)},
                       {"y1", px(kFrame.top)},
                       {"y2", px(kFrame.bottom())},
                       {"stroke", std::string(kInk)},
                       {"stroke-dasharray", "2 3"}});
  svg.element("circle", {{"cx", px(cx)},
                         {"cy", px(cy)},
                         {"r", "5"},
                         {"fill", "none"},
                         {"stroke", std::string(kInk)},
                         {"stroke-width", "2"}});
  // The label sits at the top of the plot, on the side with room.
  const double width = std::max(text_width(first, 13), text_width(second, 12)) + 12;
  const bool right = cx + width + 8 < kFrame.right();
  const double left = right ? cx + 8 : cx - 8 - width;
  svg.element("rect", {{"x", px(left)},
                       {"y", px(kFrame.top + 4)},
                       {"width", px(width)},
                       {"height", "38"},
                       {"rx", "3"},
                       {"fill", "#ffffff"},
                       {"fill-opacity", "0.92"},
                       {"stroke", std::string(kInk)},
                       {"stroke-width", "0.75"}});
  svg.text(left + 6, kFrame.top + 20, first,
           {{"font-size", "13"}, {"font-weight", "700"}, {"fill", std::string(kInk)}});
  svg.text(left + 6, kFrame.top + 36, second, {{"font-size", "12"}, {"fill", std::string(kInk)}});
  svg.close();
}

void draw_legend(SvgWriter& svg) {
  svg.open("g", {{"class", "legend"}, {"font-size", "12"}, {"fill", std::string(kInk)}});
  double x = kFrame.left;
  const double y = kHeight - 22;
  for (const MemoryKind& kind : memory_kinds()) {
    svg.element(
        "rect",
        {{"x", px(x)}, {"y", px(y - 10)}, {"width", "12"}, {"height", "12"}, {"fill", std::string(kind.color)}});
    svg.text(x + 16, y, kind.label);
    x += 16 + text_width(kind.label, 12) + 14;
  }
  x += 10;
  for (const Pass pass : {Pass::forward, Pass::recompute, Pass::backward}) {
    svg.element(
        "rect",
        {{"x", px(x)}, {"y", px(y - 10)}, {"width", "18"}, {"height", "12"}, {"fill", std::string(pass_color(pass))}});
    svg.text(x + 22, y, to_string(pass));
    x += 22 + text_width(to_string(pass), 12) + 14;
  }
  svg.close();
}

}  // namespace

std::vector<TimelineColumn> timeline_columns(const std::vector<TimelinePoint>& points, std::size_t max_columns) {
  const std::size_t n = points.size();
  const std::size_t count = std::min(n, std::max<std::size_t>(max_columns, 1));
  std::vector<TimelineColumn> columns;
  columns.reserve(count);
  for (std::size_t c = 0; c < count; ++c) {
    TimelineColumn column{c * n / count, (c + 1) * n / count, c * n / count};
    for (std::size_t i = column.first; i < column.last; ++i)
      if (points[i].live.total() > points[column.shown].live.total()) column.shown = i;
    columns.push_back(column);
  }
  return columns;
}

std::vector<StageBand> stage_bands(const std::vector<TimelinePoint>& points) {
  std::vector<StageBand> bands;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const StepLocation& at = points[i].at;
    if (!bands.empty()) {
      const StepLocation& open = bands.back().at;
      if (open.pass == at.pass && open.step == at.step && open.stage == at.stage) {
        bands.back().last = i + 1;
        continue;
      }
    }
    bands.push_back({i, i + 1, at});
  }
  return bands;
}

namespace {

bool same_location(const StepLocation& a, const StepLocation& b) {
  return a.pass == b.pass && a.step == b.step && a.stage == b.stage && a.op == b.op && a.block == b.block;
}

}  // namespace

std::vector<TimelinePoint> drawn_points(const Report& report) {
  std::vector<TimelinePoint> points = report.timeline;
  // Of the rows at the peak's location (a recomputed op can run twice), the
  // one with the most memory.
  std::optional<std::size_t> row;
  for (std::size_t i = 0; i < points.size(); ++i)
    if (same_location(points[i].at, report.peak_at) && (!row || points[i].live.total() > points[*row].live.total()))
      row = i;
  if (row) points[*row].live = report.breakdown;
  return points;
}

std::size_t peak_index(const std::vector<TimelinePoint>& points) {
  std::size_t best = 0;
  for (std::size_t i = 1; i < points.size(); ++i)
    if (points[i].live.total() > points[best].live.total()) best = i;
  return best;
}

std::string short_stage_name(const std::string& stage) {
  if (stage == "encoder") return "enc";
  if (stage == "decoder") return "dec";
  if (stage == "mesh_edge_embed") return "embed";
  if (stage.starts_with("processor.")) {
    std::string name = "p";  // (built in steps: GCC 12 warns falsely on "p" + string)
    name += stage.substr(10);
    return name;
  }
  return stage;
}

std::string timeline_svg(const Report& report, const std::string& subtitle, bool standalone) {
  if (report.timeline.empty()) throw std::logic_error("timeline_svg: the report has no timeline");
  const std::vector<TimelinePoint> points = drawn_points(report);
  const double top = std::max(gib(report.peak_bytes), gib(report.budget_bytes)) * 1.12;
  const Scale x = Scale::linear(0, static_cast<double>(points.size()), kFrame.left, kFrame.right());
  const Scale y = Scale::linear(0, top, kFrame.bottom(), kFrame.top);
  const std::size_t peak = peak_index(points);

  SvgWriter svg(kWidth, kHeight,
                {{"id", "timeline"},
                 {"class", "actmem-view"},
                 {"font-family", std::string(kFont)},
                 {"data-peak-bytes", std::to_string(report.peak_bytes)},
                 {"data-budget-bytes", std::to_string(report.budget_bytes)},
                 {"data-ops", std::to_string(points.size())},
                 {"role", "img"},
                 {"aria-label", "memory in use through one training step"}});
  svg.element("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "#ffffff"}});
  chart_title(svg, kFrame.left, 24, "Memory in use through one training step");
  svg.text(kFrame.left, 44, subtitle, {{"font-size", "12"}, {"fill", std::string(kMuted)}});
  left_axis(svg, kFrame, y, y.ticks(6), {"memory in use (GiB)"});
  bottom_axis(
      svg, kFrame, x, x.ticks(10),
      {fmt::format("op executions in the order the step runs them ({} in all)", points.size()), tick_label, false});
  draw_phases(svg, points, x);
  draw_stage_strip(svg, points, x);
  draw_stack(svg, points, timeline_columns(points, static_cast<std::size_t>(kFrame.width)), x, y, report);
  draw_budget(svg, report, y);
  draw_peak(svg, report, peak, x, y);
  draw_legend(svg);
  return svg.finish(standalone);
}

}  // namespace actmem::picture

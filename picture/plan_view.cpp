#include "plan_view.h"

#include <algorithm>

#include <fmt/format.h>

#include "axes.h"
#include "svg.h"
#include "timeline_view.h"

namespace actmem::picture {
namespace {

constexpr double kWidth = 1120, kLeft = 16, kRight = 1104;
constexpr double kBoxTop = 64, kBoxHeight = 40, kBracketTop = kBoxTop + kBoxHeight + 28, kLevel = 22;
constexpr std::int64_t kMostTicks = 32;  // more blocks than this are drawn as 32 ticks

struct Layout {
  double box;  // width of one stage's box, gap included
  double left(int stage) const { return kLeft + box * stage; }
  double right(int stage) const { return kLeft + box * (stage + 1) - 4; }
};

int depth(const std::vector<Region>& regions) {
  int d = 0;
  for (const Region& r : regions) d = std::max(d, 1 + depth(r.inner));
  return d;
}

void draw_stage(SvgWriter& svg, const ReportFigures& f, const Layout& at, int s) {
  const std::string& name = f.stages[static_cast<std::size_t>(s)];
  const std::int64_t blocks = f.plan.edge_blocks[static_cast<std::size_t>(s)];
  const double x0 = at.left(s), x1 = at.right(s);
  svg.open("g", {{"class", "stage"}, {"data-stage", name}, {"data-edge-blocks", std::to_string(blocks)}},
           blocks > 1 ? fmt::format("{}: edge update in {} blocks", name, blocks) : name);
  svg.element("rect", {{"x", px(x0)},
                       {"y", px(kBoxTop)},
                       {"width", px(x1 - x0)},
                       {"height", px(kBoxHeight)},
                       {"rx", "3"},
                       {"fill", "#eef3f8"},
                       {"stroke", "#8aa4c0"}});
  const std::string label = x1 - x0 > 0.6 * 11 * static_cast<double>(name.size()) + 6 ? name : short_stage_name(name);
  svg.text((x0 + x1) / 2, kBoxTop + 17, label, {{"text-anchor", "middle"}, {"font-size", "11"}});
  if (blocks > 1) {
    const std::int64_t ticks = std::min(blocks, kMostTicks);
    for (std::int64_t t = 1; t < ticks; ++t) {
      const double x = x0 + (x1 - x0) * static_cast<double>(t) / static_cast<double>(ticks);
      svg.element("line", {{"class", "block-tick"},
                           {"x1", px(x)},
                           {"x2", px(x)},
                           {"y1", px(kBoxTop + kBoxHeight - 12)},
                           {"y2", px(kBoxTop + kBoxHeight)},
                           {"stroke", "#d55e00"},
                           {"stroke-width", "1.2"}});
    }
    svg.text((x0 + x1) / 2, kBoxTop + kBoxHeight + 14, fmt::format("×{}", blocks),
             {{"text-anchor", "middle"}, {"font-size", "11"}, {"fill", "#d55e00"}, {"font-weight", "600"}});
  }
  svg.close();
}

// A region as a bracket: a bar under its stages with ends turned up.
void draw_regions(SvgWriter& svg, const ReportFigures& f, const Layout& at, const std::vector<Region>& regions,
                  int level) {
  for (const Region& r : regions) {
    const double x0 = at.left(r.from) + 2, x1 = at.right(r.to) - 2, y = kBracketTop + kLevel * level;
    const std::string& from = f.stages[static_cast<std::size_t>(r.from)];
    const std::string& to = f.stages[static_cast<std::size_t>(r.to)];
    svg.element("path",
                {{"class", level == 0 ? "region" : "region inner"},
                 {"data-from", from},
                 {"data-to", to},
                 {"d", fmt::format("M{} {} V{} H{} V{}", px(x0), px(y - 10), px(y), px(x1), px(y - 10))},
                 {"fill", "none"},
                 {"stroke", level == 0 ? "#0072b2" : "#56b4e9"},
                 {"stroke-width", "2.5"}},
                fmt::format("{}checkpoint region {}..{}", level == 0 ? "" : "inner ", from, to));
    draw_regions(svg, f, at, r.inner, level + 1);
  }
}

}  // namespace

std::string plan_svg(const ReportFigures& f) {
  const int stages = static_cast<int>(f.stages.size());
  const Layout at{(kRight - kLeft) / std::max(stages, 1)};
  const double height = kBracketTop + kLevel * depth(f.plan.checkpoints) + 40;
  SvgWriter svg(kWidth, height,
                {{"id", "plan"},
                 {"class", "actmem-view"},
                 {"font-family", std::string(kFont)},
                 {"role", "img"},
                 {"aria-label", "the plan over the stage chain"}});
  svg.element("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "#ffffff"}});
  chart_title(svg, kLeft, 24, "The plan over the stage chain");
  svg.text(
      kLeft, 44,
      fmt::format("brackets: checkpoint regions (only their inputs kept; recomputed in the backward pass){}; "
                  "ticks and ×B: edge update in B blocks{}",
                  depth(f.plan.checkpoints) > 1 ? ", inner regions lower" : "",
                  f.run.rollout > 1 ? fmt::format("; applies to each of the {} rollout steps", f.run.rollout) : ""),
      {{"font-size", "12"}, {"fill", std::string(kMuted)}});
  svg.open("g", {{"class", "stages"}, {"fill", std::string(kInk)}});
  for (int s = 0; s < stages; ++s) draw_stage(svg, f, at, s);
  svg.close();
  svg.open("g", {{"class", "regions"}});
  draw_regions(svg, f, at, f.plan.checkpoints, 0);
  svg.close();
  if (f.plan.checkpoints.empty())
    svg.text(kLeft, kBracketTop, "no checkpoint regions: every activation is kept for the backward pass",
             {{"font-size", "12"}, {"fill", std::string(kMuted)}});
  return svg.finish();
}

}  // namespace actmem::picture

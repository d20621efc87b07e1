#include "catalog_view.h"

#include <algorithm>

#include <fmt/format.h>

#include "actmem/util/units.h"
#include "axes.h"
#include "svg.h"

namespace actmem::picture {
namespace {

constexpr double kWidth = 1120, kRow = 26, kTop = 74;
constexpr double kNameX = 16, kBarX = 130, kBarWidth = 390;  // 100% of a device's memory at 2/3 of the bar area
constexpr double kOverflow = 1.5;                            // bars stop at 150% of the memory
constexpr double kTextX = kBarX + kBarWidth + 14;
constexpr double kRecomputeX = 820, kRecomputeWidth = 170;

double share_x(double share) { return kBarX + kBarWidth * std::min(share, kOverflow) / kOverflow; }

// The bytes a device's bar shows: the plan's peak when it fits, else the
// least any plan needs.
std::int64_t needed(const FitAnswer& a) { return a.fits ? a.peak_bytes : a.min_peak_bytes; }

std::string row_text(const CatalogEntry& e) {
  const FitAnswer& a = e.answer;
  if (a.fits)
    return fmt::format("{} of {}: {} free{}", format_bytes(a.peak_bytes), format_bytes(a.budget_bytes),
                       format_bytes(a.budget_bytes - a.peak_bytes),
                       a.plan.host_offload ? " (frames and targets in host memory)" : "");
  return fmt::format("no: needs {}, {} short", format_bytes(a.min_peak_bytes),
                     format_bytes(a.min_peak_bytes - a.budget_bytes));
}

void draw_row(SvgWriter& svg, const CatalogEntry& e, double y, double max_overhead) {
  const FitAnswer& a = e.answer;
  const double share = static_cast<double>(needed(a)) / static_cast<double>(a.budget_bytes);
  svg.open("g",
           {{"class", "device"},
            {"data-device", e.device.id},
            {"data-fits", a.fits ? "true" : "false"},
            {"data-peak-bytes", std::to_string(a.peak_bytes)},
            {"data-min-peak-bytes", std::to_string(a.min_peak_bytes)},
            {"data-budget-bytes", std::to_string(a.budget_bytes)},
            {"data-recompute-overhead", fmt::format("{}", a.report.recompute_overhead())},
            {"data-step-time-s", fmt::format("{}", a.report.step_time_s)}},
           fmt::format("{} ({}): {}", e.device.name, format_bytes(e.device.memory_bytes), row_text(e)));
  if (e.is_target)
    svg.element(
        "rect",
        {{"x", "4"}, {"y", px(y - 3)}, {"width", px(kWidth - 8)}, {"height", px(kRow - 2)}, {"fill", "#fff6d6"}});
  svg.text(kNameX, y + 14, e.device.id,
           {{"font-size", "13"}, {"fill", std::string(kInk)}, {"font-weight", e.is_target ? "700" : "400"}});
  svg.element(
      "rect",
      {{"x", px(kBarX)}, {"y", px(y + 2)}, {"width", px(share_x(1.0) - kBarX)}, {"height", "16"}, {"fill", "#f0f0f0"}});
  svg.element("rect", {{"class", "bar"},
                       {"x", px(kBarX)},
                       {"y", px(y + 2)},
                       {"width", px(share_x(share) - kBarX)},
                       {"height", "16"},
                       {"fill", std::string(a.fits ? kFits : kBudget)},
                       {"fill-opacity", a.fits ? "0.85" : "0.7"}});
  if (share > kOverflow)  // cut off: say so
    svg.text(share_x(kOverflow) - 4, y + 15, "»", {{"text-anchor", "end"}, {"fill", "#ffffff"}, {"font-size", "14"}});
  svg.text(kTextX, y + 14, row_text(e), {{"font-size", "12"}, {"fill", std::string(a.fits ? kInk : kBudget)}});
  if (a.fits) {
    const double overhead = a.report.recompute_overhead();
    const double width = max_overhead > 0 ? kRecomputeWidth * overhead / max_overhead : 0;
    svg.element("rect", {{"class", "recompute"},
                         {"x", px(kRecomputeX)},
                         {"y", px(y + 4)},
                         {"width", px(std::max(width, 1.0))},
                         {"height", "12"},
                         {"fill", "#8172b3"}});
    svg.text(kRecomputeX + width + 6, y + 14,
             fmt::format("+{:.1f}% · {}", 100.0 * overhead, format_seconds(a.report.step_time_s)),
             {{"font-size", "12"}, {"fill", std::string(kInk)}});
  } else {
    svg.text(kRecomputeX, y + 14, "—", {{"font-size", "12"}, {"fill", std::string(kMuted)}});
  }
  svg.close();
}

void draw_header(SvgWriter& svg, double bottom) {
  chart_title(svg, kNameX, 24, "Every device in the catalog: does one step fit, and at what cost?");
  svg.text(
      kNameX, 44,
      "each device's whole memory as the budget, the fastest plan that fits it (or the least memory any plan needs)",
      {{"font-size", "12"}, {"fill", std::string(kMuted)}});
  svg.open("g", {{"font-size", "12"}, {"fill", std::string(kMuted)}});
  svg.text(kBarX, kTop - 10, "peak as a share of the device's memory");
  svg.text(kTextX, kTop - 10, "peak of memory: headroom (or shortfall)");
  svg.text(kRecomputeX, kTop - 10, "recompute FLOPs · step time");
  for (const double share : {0.0, 0.5, 1.0, 1.5}) {
    const double x = share_x(share);
    svg.element("line", {{"x1", px(x)},
                         {"x2", px(x)},
                         {"y1", px(kTop - 4)},
                         {"y2", px(bottom)},
                         {"stroke", share == 1.0 ? std::string(kBudget) : std::string(kGrid)},
                         {"stroke-dasharray", share == 1.0 ? "6 4" : "none"}});
    svg.text(x, bottom + 16, fmt::format("{:.0f}%", 100 * share), {{"text-anchor", "middle"}});
  }
  svg.close();
}

}  // namespace

std::string catalog_svg(const ReportFigures& f) {
  const double bottom = kTop + kRow * static_cast<double>(f.catalog.size());
  double max_overhead = 0;
  for (const CatalogEntry& e : f.catalog)
    if (e.answer.fits) max_overhead = std::max(max_overhead, e.answer.report.recompute_overhead());
  SvgWriter svg(kWidth, bottom + 30,
                {{"id", "catalog"},
                 {"class", "actmem-view"},
                 {"font-family", std::string(kFont)},
                 {"role", "img"},
                 {"aria-label", "the device catalog"}});
  svg.element("rect", {{"width", "100%"}, {"height", "100%"}, {"fill", "#ffffff"}});
  draw_header(svg, bottom);
  double y = kTop;
  for (const CatalogEntry& e : f.catalog) {
    draw_row(svg, e, y, max_overhead);
    y += kRow;
  }
  return svg.finish();
}

}  // namespace actmem::picture

#include "axes.h"

#include <cmath>

#include <fmt/format.h>

namespace actmem::picture {

Scale::Scale(double lo, double hi, double from_px, double to_px, bool log)
    : lo_(lo), hi_(hi), from_(from_px), to_(to_px), log_(log) {}

Scale Scale::linear(double lo, double hi, double from_px, double to_px) {
  if (!(hi > lo)) hi = lo + 1;
  return Scale(lo, hi, from_px, to_px, false);
}

Scale Scale::logarithmic(double lo, double hi, double from_px, double to_px) {
  if (!(lo > 0)) lo = 1e-12;
  if (!(hi > lo)) hi = lo * 10;
  return Scale(lo, hi, from_px, to_px, true);
}

double Scale::operator()(double value) const {
  const double t = log_ ? (std::log(std::max(value, 1e-300)) - std::log(lo_)) / (std::log(hi_) - std::log(lo_))
                        : (value - lo_) / (hi_ - lo_);
  return from_ + t * (to_ - from_);
}

namespace {

std::vector<double> linear_ticks(double lo, double hi, int count) {
  const double raw = (hi - lo) / std::max(count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double v = std::ceil(lo / step) * step; v <= hi + step * 1e-9; v += step)
    ticks.push_back(std::abs(v) < step * 1e-9 ? 0.0 : v);
  return ticks;
}

// m × 10^k within [lo, hi] for each multiplier m.
std::vector<double> multiples(double lo, double hi, const std::vector<double>& multipliers) {
  std::vector<double> ticks;
  for (double decade = std::pow(10.0, std::floor(std::log10(lo))); decade <= hi; decade *= 10)
    for (const double m : multipliers)
      if (m * decade >= lo * (1 - 1e-9) && m * decade <= hi * (1 + 1e-9)) ticks.push_back(m * decade);
  return ticks;
}

// The densest of 1..9, 1-2-5 and 1 × 10^k that has at most `count` ticks.
std::vector<double> log_ticks(double lo, double hi, int count) {
  for (const std::vector<double>& multipliers :
       {std::vector<double>{1, 2, 3, 4, 5, 6, 7, 8, 9}, std::vector<double>{1, 2, 5}, std::vector<double>{1}}) {
    std::vector<double> ticks = multiples(lo, hi, multipliers);
    if (static_cast<int>(ticks.size()) <= count && ticks.size() >= 2) return ticks;
  }
  return {lo, hi};
}

}  // namespace

std::vector<double> Scale::ticks(int count) const {
  return log_ ? log_ticks(lo_, hi_, count) : linear_ticks(lo_, hi_, count);
}

std::string tick_label(double value) { return fmt::format("{:g}", value); }

void bottom_axis(SvgWriter& svg, const Frame& frame, const Scale& x, const std::vector<double>& ticks,
                 const AxisText& text) {
  svg.open("g", {{"class", "axis x"}, {"font-size", "12"}, {"fill", std::string(kMuted)}});
  for (const double v : ticks) {
    const std::string at = px(x(v));
    if (text.grid)
      svg.element(
          "line",
          {{"x1", at}, {"x2", at}, {"y1", px(frame.top)}, {"y2", px(frame.bottom())}, {"stroke", std::string(kGrid)}});
    svg.element("line", {{"x1", at},
                         {"x2", at},
                         {"y1", px(frame.bottom())},
                         {"y2", px(frame.bottom() + 5)},
                         {"stroke", std::string(kMuted)}});
    svg.text(x(v), frame.bottom() + 18, text.label(v), {{"text-anchor", "middle"}});
  }
  svg.element("line", {{"x1", px(frame.left)},
                       {"x2", px(frame.right())},
                       {"y1", px(frame.bottom())},
                       {"y2", px(frame.bottom())},
                       {"stroke", std::string(kMuted)}});
  svg.text(frame.left + frame.width / 2, frame.bottom() + 38, text.caption,
           {{"text-anchor", "middle"}, {"font-size", "13"}, {"fill", std::string(kInk)}});
  svg.close();
}

void left_axis(SvgWriter& svg, const Frame& frame, const Scale& y, const std::vector<double>& ticks,
               const AxisText& text) {
  svg.open("g", {{"class", "axis y"}, {"font-size", "12"}, {"fill", std::string(kMuted)}});
  for (const double v : ticks) {
    const std::string at = px(y(v));
    if (text.grid)
      svg.element(
          "line",
          {{"x1", px(frame.left)}, {"x2", px(frame.right())}, {"y1", at}, {"y2", at}, {"stroke", std::string(kGrid)}});
    svg.element(
        "line",
        {{"x1", px(frame.left - 5)}, {"x2", px(frame.left)}, {"y1", at}, {"y2", at}, {"stroke", std::string(kMuted)}});
    svg.text(frame.left - 8, y(v) + 4, text.label(v), {{"text-anchor", "end"}});
  }
  svg.element("line", {{"x1", px(frame.left)},
                       {"x2", px(frame.left)},
                       {"y1", px(frame.top)},
                       {"y2", px(frame.bottom())},
                       {"stroke", std::string(kMuted)}});
  const double cx = frame.left - 48, cy = frame.top + frame.height / 2;
  svg.text(cx, cy, text.caption,
           {{"text-anchor", "middle"},
            {"font-size", "13"},
            {"fill", std::string(kInk)},
            {"transform", fmt::format("rotate(-90 {} {})", px(cx), px(cy))}});
  svg.close();
}

void chart_title(SvgWriter& svg, double x, double y, std::string_view title) {
  svg.text(x, y, title, {{"font-size", "15"}, {"font-weight", "600"}, {"fill", std::string(kInk)}});
}

}  // namespace actmem::picture

#pragma once
// Mapping values to pixels, and the axes, grid lines and captions of a chart.

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "svg.h"

namespace actmem::picture {

// The plot area of a chart, in pixels.
struct Frame {
  double left = 0, top = 0, width = 0, height = 0;
  double right() const { return left + width; }
  double bottom() const { return top + height; }
};

// Values in [lo, hi] to pixels in [from_px, to_px], linearly or on a log
// scale (lo > 0 there). Values outside map outside.
class Scale {
 public:
  static Scale linear(double lo, double hi, double from_px, double to_px);
  static Scale logarithmic(double lo, double hi, double from_px, double to_px);

  double operator()(double value) const;
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  bool is_log() const { return log_; }
  // Tick values within [lo, hi]: about `count` multiples of 1, 2 or 5 × 10^k
  // on a linear scale; on a log one the densest of m × 10^k for m in 1..9,
  // in 1, 2, 5, or 1 alone, that has at most `count` ticks.
  std::vector<double> ticks(int count) const;

 private:
  Scale(double lo, double hi, double from_px, double to_px, bool log);
  double lo_, hi_, from_, to_;
  bool log_;
};

// A tick label: the value as %g ("0", "8", "0.25").
std::string tick_label(double value);

struct AxisText {
  std::string caption;                                    // under / beside the axis
  std::function<std::string(double)> label = tick_label;  // of each tick
  bool grid = true;                                       // faint lines across the frame
};

// The x axis under `frame` and the y axis left of it.
void bottom_axis(SvgWriter& svg, const Frame& frame, const Scale& x, const std::vector<double>& ticks,
                 const AxisText& text);
void left_axis(SvgWriter& svg, const Frame& frame, const Scale& y, const std::vector<double>& ticks,
               const AxisText& text);

// A chart's title, left-aligned above its frame.
void chart_title(SvgWriter& svg, double x, double y, std::string_view title);

// Colours used across the pictures.
inline constexpr std::string_view kInk = "#222222";
inline constexpr std::string_view kMuted = "#666666";
inline constexpr std::string_view kGrid = "#e4e4e4";
inline constexpr std::string_view kBudget = "#c0392b";
inline constexpr std::string_view kFits = "#2e8b57";
inline constexpr std::string_view kFont = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";

}  // namespace actmem::picture

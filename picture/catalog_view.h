#pragma once
// The device catalog as a picture: for each device, whether one step fits
// (with the fastest plan that fits its whole memory), how full that plan
// leaves it, its headroom or shortfall, and the recomputation it costs, as
// bars. Memory bars are relative to each device's memory, so that devices
// of 16 and 192 GiB read alike.

#include <string>

#include "report_figures.h"

namespace actmem::picture {

std::string catalog_svg(const ReportFigures& figures);

}  // namespace actmem::picture

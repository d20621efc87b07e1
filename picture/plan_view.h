#pragma once
// The plan drawn over the stage chain: one box per stage, each checkpoint
// region a bracket under the stages it covers (inner regions one level
// lower), and each blocked edge update as ticks dividing its stage's box,
// with the block count written under it.

#include <string>

#include "report_figures.h"

namespace actmem::picture {

std::string plan_svg(const ReportFigures& figures);

}  // namespace actmem::picture

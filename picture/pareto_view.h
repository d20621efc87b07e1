#pragma once
// Peak memory against step time as a picture: the Pareto frontier of the
// plan space (solver.h pareto_frontier), with the chosen plan, no
// checkpoints, full checkpointing and each trainer's best expressible
// setting marked, and the budget drawn. Memory is on a log scale: without
// checkpoints a step can need several times what the frontier's low end does.

#include <string>

#include "report_figures.h"

namespace actmem::picture {

std::string pareto_svg(const ReportFigures& figures);

}  // namespace actmem::picture

#pragma once
// The report as one self-contained HTML file: inline SVG pictures and a
// style sheet, no script, nothing fetched. Sections: the memory timeline,
// the Pareto picture, the catalog, the plan over the stage chain with the
// trainer exports. The figures behind the pictures are embedded as JSON
// (<script type="application/json" id="actmem-figures">, data only), in
// the shapes the CLI prints: "simulate" as `actmem simulate --json` for the
// plan, "catalog" as the rows of `actmem sweep --json`, "marks", "frontier"
// and "exports".

#include <string>

#include <nlohmann/json.hpp>

#include "report_figures.h"

namespace actmem::picture {

std::string html_report(const ReportFigures& figures);

// The embedded figures (see above).
nlohmann::json figures_json(const ReportFigures& figures);

}  // namespace actmem::picture

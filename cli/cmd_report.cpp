// `actmem report`: the memory pictures of one step in one self-contained
// HTML file (docs/report.md), or the timeline alone as SVG.
#include <algorithm>
#include <iostream>

#include <fmt/format.h>

#include "actmem/plan/output_files.h"
#include "actmem/solve/solver.h"
#include "actmem/util/error.h"
#include "actmem/util/units.h"
#include "commands.h"
#include "html_report.h"
#include "progress_line.h"
#include "report_text.h"
#include "run_setup.h"
#include "timeline_view.h"

namespace actmem::cli {
namespace {

struct Chosen {
  Target target;
  Plan plan;
  std::string origin;  // where the plan came from, for people
};

// The plan of --plan (a file, whose model, run, device and budget apply
// unless options override them, or a built-in plan), else the solver's.
Chosen choose(const RunSetup& setup, const std::string& plan_name, const CLI::App& app) {
  if (!plan_name.empty()) {
    const PlanChoice choice(plan_name);
    Target target = setup.target(choice.document, app);
    Plan plan = choice.plan(target.graph);
    return {std::move(target), std::move(plan), choice.document ? plan_name : "built-in plan " + plan_name};
  }
  Target target = setup.target();
  Solution s = solve(target.graph, target.device, target.budget_bytes, setup.solver_options());
  return {std::move(target), std::move(s.plan),
          s.feasible ? "the fastest plan that fits, as actmem plan writes it"
                     : "nothing fits: the plan that needs the least memory"};
}

// Everything the report draws; the timeline it cannot draw is an error
// about the report, which has no --timeline option to name.
picture::ReportFigures gather(const RunSetup& setup, const Chosen& chosen) {
  const auto& [graph, device, budget] = chosen.target;
  try {
    return picture::gather_figures(
        graph, device, budget, chosen.plan, chosen.origin, setup.solver_options(), [&setup](const Device& d) {
          return std::max<std::int64_t>(d.memory_bytes - setup.headroom->of(d.memory_bytes), 0);
        });
  } catch (const InputError& e) {
    if (!e.is_argument() || e.source() != "timeline") throw;
    throw InputError("report", "", "it draws the step's timeline, and " + e.message());
  }
}

}  // namespace

int run_report(const Args& args) {
  CLI::App app{
      "Draw one training step's memory: the timeline, the memory/time trade-off, the catalog and the plan, "
      "in one self-contained HTML file (docs/report.md).",
      "report"};
  RunSetup setup;
  setup.add_options(app);
  setup.add_solver_options(app);
  setup.add_headroom_option(app);  // the solver's plan is fit's; a --plan keeps its own budget
  std::string plan_name, output, svg_path;
  app.add_option("--plan", plan_name,
                 "plan file, or none, full, every:K, deepmind, deepmind:B (default: the fastest plan that fits)");
  app.add_option("-o,--output", output, "HTML report to write (atomically), or - for stdout");
  app.add_option("--svg", svg_path, "also (or only) write the memory timeline alone as an SVG file");
  parse(app, args);
  if (output.empty() && svg_path.empty())
    throw UsageError(
        "report: expected -o FILE (the HTML report) or --svg FILE (the timeline alone); see 'actmem report --help'");

  ProgressLine progress("actmem report", setup.quiet);
  const Chosen chosen = choose(setup, plan_name, app);
  const auto& [graph, device, budget] = chosen.target;
  picture::ReportFigures figures = gather(setup, chosen);
  figures.subtitle = describe_run(graph, device);
  figures.subtitle.pop_back();  // the newline
  figures.subtitle += ", budget " + format_bytes(budget);

  // Both files or neither (output_files.h).
  std::vector<std::pair<std::string, std::int64_t>> written;  // path, bytes
  OutputFiles files;
  const auto stage = [&](const std::string& path, std::string text) {
    written.emplace_back(path, static_cast<std::int64_t>(text.size()));
    files.stage(path, std::move(text));
  };
  if (!svg_path.empty()) stage(svg_path, picture::timeline_svg(figures.report, figures.subtitle, true));
  const std::string html = output.empty() ? "" : picture::html_report(figures);
  if (!output.empty() && output != "-") stage(output, html);
  progress.clear();
  files.publish();
  if (output == "-") std::cout << html;

  const Report& r = figures.report;
  if (!setup.quiet)
    for (const auto& [path, bytes] : written)
      std::cerr << fmt::format("wrote {} ({}): peak {} of {}, {}\n", one_line(path), format_bytes(bytes),
                               format_bytes(r.peak_bytes), format_bytes(budget), r.fits ? "fits" : "does not fit");
  return r.fits ? 0 : 1;
}

}  // namespace actmem::cli

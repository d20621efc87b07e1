// `actmem report`: the memory pictures of one step in one self-contained
// HTML file (docs/report.md), or the timeline alone as SVG.
#include <algorithm>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

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

// Writes each (path, text) atomically; if one fails, the files this call
// created before it are removed again, so a failed report leaves none.
void write_outputs(const std::vector<std::pair<std::string, std::string>>& outputs) {
  std::vector<std::string> created;
  try {
    for (const auto& [path, text] : outputs) {
      std::error_code ec;
      const bool existed = std::filesystem::exists(path, ec);
      write_file_atomically(path, text);
      if (!existed) created.push_back(path);
    }
  } catch (...) {
    std::error_code ignored;  // the first failure is the one to report
    for (const std::string& path : created) std::filesystem::remove(path, ignored);
    throw;
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
  picture::ReportFigures figures = picture::gather_figures(
      graph, device, budget, chosen.plan, chosen.origin, setup.solver_options(), [&setup](const Device& d) {
        return std::max<std::int64_t>(d.memory_bytes - setup.headroom->of(d.memory_bytes), 0);
      });
  figures.subtitle = describe_run(graph, device);
  figures.subtitle.pop_back();  // the newline
  figures.subtitle += ", budget " + format_bytes(budget);

  std::vector<std::pair<std::string, std::string>> outputs;
  if (!svg_path.empty()) outputs.emplace_back(svg_path, picture::timeline_svg(figures.report, figures.subtitle, true));
  const std::string html = output.empty() ? "" : picture::html_report(figures);
  if (!output.empty() && output != "-") outputs.emplace_back(output, html);
  progress.clear();
  write_outputs(outputs);
  if (output == "-") std::cout << html;

  const Report& r = figures.report;
  if (!setup.quiet)
    for (const auto& [path, text] : outputs)
      std::cerr << fmt::format("wrote {} ({}): peak {} of {}, {}\n", one_line(path),
                               format_bytes(static_cast<std::int64_t>(text.size())), format_bytes(r.peak_bytes),
                               format_bytes(budget), r.fits ? "fits" : "does not fit");
  return r.fits ? 0 : 1;
}

}  // namespace actmem::cli

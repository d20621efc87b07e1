// `actmem plan`: write the plan file trainers consume, or print one trainer's
// export as text to paste into that trainer's config (--export).
#include <algorithm>
#include <iostream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "actmem/plan/exports.h"
#include "actmem/plan/output_files.h"
#include "actmem/plan/plan_document.h"
#include "actmem/solve/solver.h"
#include "actmem/util/error.h"
#include "actmem/util/suggest.h"
#include "actmem/util/units.h"
#include "commands.h"
#include "run_setup.h"

namespace actmem::cli {
namespace {

std::string headroom_note(std::int64_t headroom) {
  return headroom > 0 ? fmt::format(", after {} kept free by --headroom", format_bytes(headroom)) : std::string{};
}

}  // namespace

int run_plan(const Args& args) {
  CLI::App app{"Find the fastest plan that fits and write it as JSON (format actmem.plan, version 1).", "plan"};
  RunSetup setup;
  setup.add_planning_options(app);
  std::string output;
  std::string trainer;
  app.add_option("-o,--output", output, "plan file to write (atomically), or - for stdout");
  app.add_option("--export", trainer,
                 "print only this trainer's export, as text to paste into its config: " +
                     fmt::format("{}", fmt::join(trainer_export_names(), ", ")));
  parse(app, args);
  const std::vector<std::string> trainers = trainer_export_names();
  if (output.empty() && trainer.empty()) throw InputError("plan", "", "expected -o FILE (or -o -) or --export TRAINER");
  if (!trainer.empty() && std::find(trainers.begin(), trainers.end(), trainer) == trainers.end())
    throw InputError("--export", "",
                     fmt::format("expected one of {}, got '{}'{}", fmt::join(trainers, ", "), trainer,
                                 did_you_mean(trainer, trainers)));
  if (!trainer.empty() && output == "-") throw InputError("--export", "", "prints to stdout; -o - would too");

  // `budget` is what plans must fit, and what the plan file records: the
  // budget less the headroom.
  const auto [graph, device, budget] = setup.target();
  const Solution solution = solve(graph, device, budget, setup.solver_options());
  if (!solution.feasible) {
    std::cerr << fmt::format(
        "actmem: does not fit: the least memory any plan needs is {} (budget {}{}); no plan "
        "written\n",
        format_bytes(solution.min_peak_bytes), format_bytes(budget), headroom_note(setup.headroom_bytes(device)));
    return 1;
  }
  const nlohmann::json exports = trainer_exports(graph, device, budget, solution.plan, solution.report);
  const std::string text =
      dump(plan_document_json(graph, device, budget, solution.plan, solution.report, exports)) + "\n";
  if (!trainer.empty() && exports.at(trainer).contains("unsupported"))
    throw InputError("--export", "",
                     fmt::format("{}: {}", trainer, exports.at(trainer).at("unsupported").get<std::string>()));
  if (!trainer.empty()) std::cout << exports.at(trainer).at("snippet").get<std::string>();
  if (output.empty()) return 0;
  if (output == "-") {
    std::cout << text;
  } else {
    write_file_atomically(output, text);
    std::cerr << fmt::format("wrote {}: peak {} of {}{}, recompute +{:.1f}%\n", one_line(output),
                             format_bytes(solution.report.peak_bytes), format_bytes(budget),
                             headroom_note(setup.headroom_bytes(device)), 100.0 * solution.report.recompute_overhead());
  }
  return 0;
}

}  // namespace actmem::cli

#pragma once
// The options every planning command shares: which model, how it is trained,
// on what device and within what budget.

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "actmem/cost_graph.h"
#include "actmem/device.h"
#include "actmem/model.h"
#include "actmem/plan_document.h"
#include "actmem/run_options.h"
#include "actmem/solver.h"

namespace actmem::cli {

// What a planning command works on: the cost graph of the model under the
// run options, the device, and the budget.
struct Target {
  CostGraph graph;
  Device device;
  std::int64_t budget_bytes = 0;
};

// Values are checked as the command line is parsed (InputError naming the
// option); files are read and the graph is built only by the loaders below.
struct RunSetup {
  std::string model = "graphcast";
  std::string device = "tpu-v4";
  std::optional<std::int64_t> memory_bytes;  // --memory: a device known only by its memory
  std::optional<std::int64_t> budget;        // --budget: at most the device's memory
  RunOptions run;                            // --dtype, --framework, --optimizer, --batch, --rollout
  bool nested_regions = false;               // the solver also searches nested regions
  bool quiet = false;                        // no progress line or notes on stderr (progress_line.h)

  // `batch_and_rollout`: false for commands that take lists of them instead.
  // Adds --quiet too.
  void add_options(CLI::App& app, bool batch_and_rollout = true);
  // For the commands that run the solver.
  void add_solver_options(CLI::App& app);
  SolverOptions solver_options() const;

  // Loaded and validated; InputError on anything wrong.
  ModelDescription load_model() const;
  Device load_device() const;
  std::int64_t budget_bytes(const Device& device) const;  // --budget, checked against the device
  Target target() const;  // all of the above, loaded and built
  // The same for a command that may read a plan file: the document's model,
  // run, device and budget, each replaced by what the command line of `app`
  // gives (the model must still match the document's: plan_for checks).
  Target target(const std::optional<PlanDocument>& document, const CLI::App& app) const;
};

// --plan as simulate and report take it: a plan file, or a built-in plan.
struct PlanChoice {
  std::string name;                      // as given
  std::optional<PlanDocument> document;  // read when `name` is a file

  explicit PlanChoice(std::string name_or_path);
  // The plan for the graph (InputError if it does not fit its stages).
  Plan plan(const CostGraph& graph) const;
};

}  // namespace actmem::cli

#include "run_setup.h"

#include <filesystem>

#include "actmem/simulator.h"
#include "actmem/units.h"
#include "progress_line.h"

namespace actmem::cli {

void RunSetup::add_options(CLI::App& app, bool batch_and_rollout) {
  app.add_option("--model", model, "preset name or model JSON file")->capture_default_str();
  app.add_option("--device", device, "catalog id (see 'actmem devices') or device JSON file")->capture_default_str();
  app.add_option("--memory", memory, "a device known only by its memory, e.g. 24GiB (replaces --device)");
  app.add_option("--budget", budget, "memory budget, e.g. 30GiB (default: the device's memory)");
  app.add_option("--framework", framework, "pytorch or jax")->capture_default_str();
  app.add_option("--dtype", dtype, "activation dtype: float32 or bfloat16")->capture_default_str();
  app.add_option("--optimizer", optimizer, "adam or sgd")->capture_default_str();
  add_quiet_option(app, quiet);
  if (!batch_and_rollout) return;
  app.add_option("--batch", batch, "samples per device")->capture_default_str();
  app.add_option("--rollout", rollout, "autoregressive steps trained through")->capture_default_str();
}

void RunSetup::add_solver_options(CLI::App& app) {
  app.add_flag("--nested-regions", nested_regions,
               "also search checkpoint regions nested one level inside others (exact; slower: "
               "about 0.4 s on GraphCast at rollout 1, 2 s at rollout 12)");
}

SolverOptions RunSetup::solver_options() const {
  SolverOptions options;
  options.allow_nested_regions = nested_regions;
  return options;
}

ModelDescription RunSetup::load_model() const {
  // A model file may give its geometry instead of its counts: large
  // geometry takes seconds.
  const ProgressLine progress("actmem: model", quiet);
  return actmem::load_model(model);
}

RunOptions RunSetup::run_options() const {
  RunOptions run;
  run.dtype = parse_dtype(dtype, "--dtype");
  run.framework = parse_framework(framework, "--framework");
  run.optimizer = parse_optimizer(optimizer, "--optimizer");
  run.batch = batch;
  run.rollout = rollout;
  validate(run);
  return run;
}

Device RunSetup::load_device() const {
  if (!memory.empty()) return device_with_memory(parse_bytes(memory, "--memory"));
  return actmem::load_device(device);
}

std::int64_t RunSetup::budget_bytes(const Device& d) const {
  return budget.empty() ? d.memory_bytes : parse_bytes(budget, "--budget");
}

Target RunSetup::target() const {
  Device d = load_device();
  const std::int64_t bytes = budget_bytes(d);
  return Target{CostGraph::build(load_model(), run_options()), std::move(d), bytes};
}

Target RunSetup::target(const std::optional<PlanDocument>& document, const CLI::App& app) const {
  if (!document) return target();
  const auto given = [&](const char* option) { return app.count(option) > 0; };
  const ModelDescription m = document->model && !given("--model") ? *document->model : load_model();
  RunOptions run = run_options();
  if (document->run) {
    const RunOptions& r = *document->run;
    if (!given("--dtype")) run.dtype = r.dtype;
    if (!given("--framework")) run.framework = r.framework;
    if (!given("--optimizer")) run.optimizer = r.optimizer;
    if (!given("--batch")) run.batch = r.batch;
    if (!given("--rollout")) run.rollout = r.rollout;
  }
  const bool device_given = given("--device") || given("--memory");
  Device d = document->device && !device_given ? *document->device : load_device();
  const std::int64_t bytes =
      document->budget_bytes && !given("--budget") && !device_given ? *document->budget_bytes : budget_bytes(d);
  return Target{CostGraph::build(m, run), std::move(d), bytes};
}

PlanChoice::PlanChoice(std::string name_or_path) : name(std::move(name_or_path)) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(name, ec)) document = read_plan_document(name);
}

Plan PlanChoice::plan(const CostGraph& graph) const {
  return document ? plan_for(*document, graph) : builtin_plan(name, graph.stages(), edges_per_stage(graph));
}

}  // namespace actmem::cli

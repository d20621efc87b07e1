#include "run_setup.h"

#include "actmem/units.h"

namespace actmem::cli {

void RunSetup::add_options(CLI::App& app, bool batch_and_rollout) {
  app.add_option("--model", model, "preset name or model JSON file")->capture_default_str();
  app.add_option("--device", device, "catalog id (see 'actmem devices') or device JSON file")->capture_default_str();
  app.add_option("--memory", memory, "a device known only by its memory, e.g. 24GiB (replaces --device)");
  app.add_option("--budget", budget, "memory budget, e.g. 30GiB (default: the device's memory)");
  app.add_option("--framework", framework, "pytorch or jax")->capture_default_str();
  app.add_option("--dtype", dtype, "activation dtype: float32 or bfloat16")->capture_default_str();
  app.add_option("--optimizer", optimizer, "adam or sgd")->capture_default_str();
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

ModelDescription RunSetup::load_model() const { return actmem::load_model(model); }

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

}  // namespace actmem::cli

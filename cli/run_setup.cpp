#include "run_setup.h"

#include <charconv>

#include <fmt/format.h>

#include "actmem/cost/memory_rules.h"
#include "actmem/simulate/simulator.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/units.h"
#include "progress_line.h"

namespace actmem::cli {

void RunSetup::add_options(CLI::App& app, bool one_run) {
  app.add_option("--model", model, "preset name or model JSON file")->capture_default_str();
  if (one_run) {
    app.add_option("--device", device, "catalog id (see 'actmem devices') or device JSON file")->capture_default_str();
    app.add_option_function<std::string>(
        "--memory", [this](const std::string& v) { memory_bytes = parse_bytes(v, "--memory"); },
        "a device known only by its memory, e.g. 24GiB (replaces --device)");
  }
  app.add_option_function<std::string>(
      "--budget", [this](const std::string& v) { budget = parse_bytes(v, "--budget"); },
      "memory budget, e.g. 30GiB: at most the device's memory (default: all of it)");
  app.add_option_function<std::string>(
         "--framework", [this](const std::string& v) { run.framework = parse_framework(v, "--framework"); },
         "pytorch or jax")
      ->default_str(to_string(run.framework));
  app.add_option_function<std::string>(
         "--dtype", [this](const std::string& v) { run.dtype = parse_dtype(v, "--dtype"); },
         "activation dtype: float32 or bfloat16")
      ->default_str(to_string(run.dtype));
  app.add_option_function<std::string>(
         "--autocast", [this](const std::string& v) { run.autocast = parse_autocast(v, "--autocast"); },
         "PyTorch bfloat16 only: whose torch.autocast lists the step follows, cuda (GPUs, ROCm's too: "
         "LayerNorm in float32) or cpu")
      ->default_str(to_string(run.autocast));
  app.add_option_function<std::string>(
         "--optimizer", [this](const std::string& v) { run.optimizer = parse_optimizer(v, "--optimizer"); },
         "adam or sgd")
      ->default_str(to_string(run.optimizer));
  app.add_option_function<std::vector<std::string>>(
         "--rule-off",
         [this](const std::vector<std::string>& names) {
           check_rule_names(names, "--rule-off");
           for (const std::string& name : names) run.add_rule_off(name);
         },
         "predict without this memory rule (repeatable; 'actmem rules' lists them): what it contributes")
      ->take_all()
      ->expected(1)
      ->type_name("RULE");
  add_quiet_option(app, quiet);
  if (!one_run) return;
  app.add_option_function<std::string>(
         "--batch", [this](const std::string& v) { run.batch = parse_integer(v, "--batch", 1, kMaxBatch); },
         fmt::format("samples per device, 1..{}", kMaxBatch))
      ->default_str("1");
  app.add_option_function<std::string>(
         "--rollout", [this](const std::string& v) { run.rollout = parse_integer(v, "--rollout", 1, kMaxRollout); },
         fmt::format("autoregressive steps trained through, 1..{} (and at most {} ops in the step)", kMaxRollout,
                     kMaxStepOps))
      ->default_str("1");
}

void RunSetup::add_solver_options(CLI::App& app) {
  app.add_flag("--nested-regions", nested_regions,
               "also search checkpoint regions nested one level inside others (exact; slower: "
               "about 0.4 s on GraphCast at rollout 1, 2 s at rollout 12; up to 20 s at actmem's limits, "
               "docs/reliability.md)");
  app.add_flag("--no-host-offload", no_host_offload,
               "JAX rollouts: never offer a plan that keeps the rollout's per-step state (the step checkpoints' "
               "frames, the targets) in host memory, which is offered only when nothing fits on the device "
               "(docs/plan-format.md, host_offload)");
}

std::int64_t Headroom::of(std::int64_t budget_bytes) const {
  return bytes + static_cast<std::int64_t>(share * static_cast<double>(budget_bytes));
}

std::string Headroom::describe(std::int64_t budget_bytes) const {
  const std::string size = format_bytes(of(budget_bytes));
  return share > 0 && bytes == 0 ? fmt::format("{} ({:g}%)", size, 100.0 * share) : size;
}

namespace {

// "5%" (0..50% of the budget), "0", or a byte size ("2GiB").
Headroom parse_headroom(const std::string& text) {
  Headroom h;
  if (text == "0") return h;
  if (!text.empty() && text.back() == '%') {
    // Decimal only: strtod would also read hexadecimal ("0x10%" as 16%).
    const std::string_view number(text.data(), text.size() - 1);
    double percent = -1;
    const auto [end, error] =
        std::from_chars(number.data(), number.data() + number.size(), percent, std::chars_format::fixed);
    if (number.empty() || error != std::errc{} || end != number.data() + number.size() ||
        !(percent >= 0 && percent <= 50))
      throw InputError("--headroom", "",
                       fmt::format("expected a share from 0% to 50% or a size such as 2GiB, got '{}'", text));
    h.share = percent / 100.0;
    return h;
  }
  h.bytes = parse_bytes(text, "--headroom");
  return h;
}

}  // namespace

void RunSetup::add_headroom_option(CLI::App& app) {
  headroom = Headroom{0, kDefaultHeadroomShare};
  app.add_option_function<std::string>(
         "--headroom", [this](const std::string& v) { headroom = parse_headroom(v); },
         "memory to leave free for what the model does not predict: a share of the budget (0% to 50%) or a size "
         "such as 2GiB; 0 plans to the last byte (docs/cost-model.md, \"Headroom\")")
      ->default_str(fmt::format("{:g}%", 100.0 * kDefaultHeadroomShare));
}

std::int64_t RunSetup::headroom_bytes(const Device& d) const { return headroom ? headroom->of(budget_bytes(d)) : 0; }

SolverOptions RunSetup::solver_options() const {
  SolverOptions options;
  options.allow_nested_regions = nested_regions;
  options.allow_host_offload = !no_host_offload;
  return options;
}

ModelDescription RunSetup::load_model() const {
  // A model file may give its geometry instead of its counts: large
  // geometry takes seconds.
  const ProgressLine progress("actmem: model", quiet);
  return actmem::load_model(model);
}

Device RunSetup::load_device() const {
  if (memory_bytes) return device_with_memory(*memory_bytes);
  return actmem::load_device(device);
}

std::int64_t RunSetup::budget_bytes(const Device& d) const {
  return budget ? budget_within(d, *budget, "--budget") : d.memory_bytes;
}

Target RunSetup::target() const {
  Device d = load_device();
  const std::int64_t whole = budget_bytes(d);
  const std::int64_t kept = headroom_bytes(d);
  if (kept >= whole)
    throw InputError("--headroom", "",
                     fmt::format("{} leaves nothing of the {} budget", format_bytes(kept), format_bytes(whole)));
  return Target{CostGraph::build(load_model(), run), std::move(d), whole - kept};
}

Target RunSetup::target(const std::optional<PlanDocument>& document, const CLI::App& app) const {
  if (!document) return target();
  const auto given = [&](const char* option) { return app.count(option) > 0; };
  const ModelDescription m = document->model && !given("--model") ? *document->model : load_model();
  RunOptions options = run;
  if (document->run) {
    const RunOptions& r = *document->run;
    if (!given("--dtype")) options.dtype = r.dtype;
    if (!given("--framework")) options.framework = r.framework;
    if (!given("--optimizer")) options.optimizer = r.optimizer;
    if (!given("--autocast")) options.autocast = r.autocast;
    if (!given("--batch")) options.batch = r.batch;
    if (!given("--rollout")) options.rollout = r.rollout;
    if (!given("--rule-off")) options.rules_off = r.rules_off;
  }
  const bool device_given = given("--device") || given("--memory");
  Device d = document->device && !device_given ? *document->device : load_device();
  const std::int64_t bytes = given("--budget") || device_given ? budget_bytes(d) : document->budget_on(d);
  return Target{CostGraph::build(m, options), std::move(d), bytes};
}

}  // namespace actmem::cli

#include "actmem/plan/plan_document.h"
#include "actmem/plan/builtin_plans.h"

#include <fmt/format.h>

#include "actmem/cost/memory_rules.h"
#include "actmem/simulate/simulator.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "util/json_fields.h"
#include "util/json_text.h"

namespace actmem {

PlanDocument plan_document_from_json(nlohmann::json document, const std::string& source) {
  const detail::FieldReader in(document, source);
  in.reject_unknown_fields({"format", "version", "model", "run", "device", "budget_bytes", "stages", "checkpoints",
                            "edge_blocks", "step_checkpoint", "host_offload", "predicted", "exports"});
  if (in.has("format") && in.string("format") != "actmem.plan")
    in.fail("format", fmt::format("expected \"actmem.plan\", got \"{}\"", in.string("format")));
  if (in.has("version") && in.positive_int("version", 1000) != 1)
    in.fail("version", fmt::format("expected 1 (this actmem reads plan format version 1), got {}",
                                   detail::describe(in.value("version"))));
  PlanDocument d;
  d.source = source;
  if (in.has("model")) {
    // model_from_json also checks the fingerprint the document claims.
    try {
      d.model = model_from_json(in.value("model"), source);
    } catch (const InputError& e) {
      throw InputError(source, "/model" + e.field(), e.message());
    }
  }
  if (in.has("run")) {
    d.run = run_options_from_json(in.value("run"), source, "/run");
    check_rule_names(d.run->rules_off, source, "/run/rules_off");
  }
  if (in.has("device")) d.device = device_from_json(in.value("device"), source, "/device");
  if (in.has("budget_bytes")) d.budget_bytes = in.positive_int("budget_bytes", kMaxDeviceBytes);
  if (d.device) d.budget_on(*d.device);
  d.plan = nlohmann::json::object();
  for (const char* key : {"stages", "checkpoints", "edge_blocks", "step_checkpoint", "host_offload"})
    if (in.has(key)) d.plan[key] = std::move(document[key]);  // moved, not copied: `in` reads no more of it
  if (!d.plan.contains("checkpoints")) in.fail("checkpoints", "missing required field");
  return d;
}

std::int64_t PlanDocument::budget_on(const Device& on) const {
  if (!budget_bytes) return on.memory_bytes;
  if (*budget_bytes > on.memory_bytes)
    throw InputError(source, "/budget_bytes",
                     fmt::format("expected at most the memory_bytes of the device it is applied to ({}: {}), got {}",
                                 on.id, on.memory_bytes, *budget_bytes));
  return *budget_bytes;
}

PlanDocument read_plan_document(const std::string& path) {
  return plan_document_from_json(detail::read_json_file(path), path);
}

Plan plan_for(const PlanDocument& d, const CostGraph& graph) {
  if (d.model && fingerprint(*d.model) != fingerprint(graph.model()))
    throw InputError(d.source, "/model/fingerprint",
                     fmt::format("plan was made for model '{}' ({}), not for '{}' ({})", d.model->name,
                                 fingerprint(*d.model), graph.model().name, fingerprint(graph.model())));
  if (d.plan.contains("stages") && d.plan["stages"] != nlohmann::json(graph.stages()))
    throw InputError(
        d.source, "/stages",
        fmt::format("expected the stage chain of '{}' ({})", graph.model().name, describe_chain(graph.chain())));
  Plan plan = plan_from_json(d.plan, graph.chain(), d.source);
  validate_for_run(plan, graph, d.source);
  return plan;
}

PlanChoice::PlanChoice(std::string name_or_path) : name(std::move(name_or_path)) {
  if (detail::names_regular_file(name)) document = read_plan_document(name);
}

Plan PlanChoice::plan(const CostGraph& graph) const {
  return document ? plan_for(*document, graph) : builtin_plan(name, graph.chain());
}

nlohmann::json plan_document_json(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                                  const Plan& plan, const Report& predicted, const nlohmann::json& exports) {
  nlohmann::json model = to_json(graph.model());
  model["fingerprint"] = fingerprint(graph.model());
  nlohmann::json document{{"format", "actmem.plan"},
                          {"version", 1},
                          {"model", model},
                          {"run", to_json(graph.run())},
                          {"device", to_json(device)},
                          {"budget_bytes", budget_bytes},
                          {"stages", graph.stages()},
                          {"predicted", to_json(predicted)},
                          {"exports", exports}};
  document.update(plan_to_json(plan, graph.stages()));
  return document;
}

}  // namespace actmem

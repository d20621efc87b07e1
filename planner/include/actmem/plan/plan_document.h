#pragma once
// The plan file (docs/plan-format.md; schema in docs/plan.schema.json):
// {"format": "actmem.plan", "version": 1, model, run, device, budget_bytes,
//  stages, checkpoints, edge_blocks, predicted, exports}.
//
// Reading accepts a full document, or a partial one holding only
// "checkpoints" (and optionally "edge_blocks" and "stages") for a model given
// separately. A document's model fingerprint must match the model it is
// applied to.

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/model/run_options.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"

namespace actmem {

struct PlanDocument {
  std::optional<ModelDescription> model;
  std::optional<RunOptions> run;
  std::optional<Device> device;
  std::optional<std::int64_t> budget_bytes;  // as written; read it through budget_on()
  nlohmann::json plan;                       // the checkpoints/edge_blocks part, validated once the model is known
  std::string source;

  // The document's budget for `device` (its own device, or the one a
  // caller puts in its place), checked against that device's memory:
  // InputError(source, "/budget_bytes", …) when above it, whether or not
  // the document names a device. The device's memory when it has no budget.
  std::int64_t budget_on(const Device& device) const;
};

// Reads a plan file; syntax and the optional sections are validated here.
PlanDocument read_plan_document(const std::string& path);

// The same for a document already in memory; `source` names it in errors.
// The plan's part is moved out of `document`, never copied.
PlanDocument plan_document_from_json(nlohmann::json document, const std::string& source);

// The plan of a document for a model's stage chain. Throws InputError if the
// document names another model (fingerprint mismatch) or its regions and
// blocks do not fit the stages.
Plan plan_for(const PlanDocument& document, const CostGraph& graph);

// A plan as `--plan` (CLI) and `plan=` (Python) take it: an existing file
// is read as a plan document, anything else names a built-in plan
// (builtin_plan(): none, full, every:K, deepmind, deepmind:B).
struct PlanChoice {
  std::string name;                      // as given
  std::optional<PlanDocument> document;  // read when `name` is a file

  explicit PlanChoice(std::string name_or_path);
  // The plan for the graph (InputError if it does not fit its stages).
  Plan plan(const CostGraph& graph) const;
};

// The complete plan document for a plan and its simulation.
nlohmann::json plan_document_json(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                                  const Plan& plan, const Report& predicted, const nlohmann::json& exports);

}  // namespace actmem

#pragma once
// A plan to and from its JSON document (format "actmem.plan", version 1;
// plan_document.h, docs/plan-format.md) without touching files.
//
//   json doc = plan_to_document(graph, device, budget, plan);  // simulated, with exports
//   Plan again = plan_from_document(doc, graph, "scheduler");  // == plan

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/plan/plan_document.h"
#include "actmem/simulate/plan.h"

namespace actmem {

// The complete plan document: `plan` simulated against `budget_bytes` on
// `device` ("predicted") and exported to each trainer ("exports").
nlohmann::json plan_to_document(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                                const Plan& plan);

// The plan of a document for `graph`: InputError when the document is
// malformed, names another model (fingerprint) or its regions and blocks do
// not fit the graph's stages.
Plan plan_from_document(nlohmann::json document, const CostGraph& graph, const std::string& source);

}  // namespace actmem

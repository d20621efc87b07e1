#include "actmem/plan/plan_json.h"

#include "actmem/plan/exports.h"
#include "actmem/simulate/simulator.h"

namespace actmem {

nlohmann::json plan_to_document(const CostGraph& graph, const Device& device, std::int64_t budget_bytes,
                                const Plan& plan) {
  const Report predicted = simulate(graph, device, budget_bytes, plan);
  const nlohmann::json exports = trainer_exports(graph, device, budget_bytes, plan, predicted);
  return plan_document_json(graph, device, budget_bytes, plan, predicted, exports);
}

Plan plan_from_document(nlohmann::json document, const CostGraph& graph, const std::string& source) {
  return plan_for(plan_document_from_json(std::move(document), source), graph);
}

}  // namespace actmem

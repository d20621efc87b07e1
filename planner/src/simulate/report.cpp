#include "actmem/simulate/report.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace actmem {

std::string to_string(Pass pass) {
  switch (pass) {
    case Pass::forward: return "forward";
    case Pass::recompute: return "recompute";
    case Pass::backward: return "backward";
    case Pass::optimizer: return "optimizer";
  }
  return "?";
}

nlohmann::json to_json(const MemoryBreakdown& b) {
  return nlohmann::json{
      {"parameters", b.parameters}, {"gradients", b.gradients},     {"optimizer_state", b.optimizer_state},
      {"inputs", b.inputs},         {"activations", b.activations}, {"workspace", b.workspace},
      {"reserved", b.reserved}};
}

nlohmann::json to_json(const StepLocation& at) {
  nlohmann::json j{{"pass", to_string(at.pass)}, {"step", at.step}, {"stage", at.stage}, {"op", at.op}};
  if (at.block >= 0) j["block"] = at.block;
  return j;
}

nlohmann::json to_json(const Report& r) {
  nlohmann::json out{{"fits", r.fits},
                     {"peak_bytes", r.peak_bytes},
                     {"budget_bytes", r.budget_bytes},
                     {"breakdown", to_json(r.breakdown)},
                     {"activation_bytes_after_forward", r.activation_bytes_after_forward},
                     {"forward_peak_bytes", r.forward_peak_bytes},
                     {"peak_dynamic_bytes", r.peak_dynamic_bytes},
                     {"compiler_floor_bytes", r.compiler_floor_bytes},
                     {"forward_flops", r.forward_flops},
                     {"backward_flops", r.backward_flops},
                     {"recompute_flops", r.recompute_flops},
                     {"recompute_overhead", r.recompute_overhead()},
                     {"step_time_s", r.step_time_s},
                     {"peak_at", to_json(r.peak_at)},
                     {"notes", r.notes}};
  return out;
}

nlohmann::json to_json(const std::vector<PeakBuffer>& buffers) {
  nlohmann::json list = nlohmann::json::array();
  for (const PeakBuffer& b : buffers)
    list.push_back({{"tensor", b.tensor}, {"category", b.category}, {"bytes", b.bytes}});
  return list;
}

std::string timeline_csv(const Report& r) {
  std::string csv =
      "index,pass,step,stage,block,op,parameters,gradients,optimizer_state,inputs,activations,workspace,reserved,"
      "total\n";
  for (std::size_t i = 0; i < r.timeline.size(); ++i) {
    const TimelinePoint& p = r.timeline[i];
    const MemoryBreakdown& b = p.live;
    csv += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", i, to_string(p.at.pass), p.at.step, p.at.stage,
                       p.at.block, p.at.op, b.parameters, b.gradients, b.optimizer_state, b.inputs, b.activations,
                       b.workspace, b.reserved, b.total());
  }
  return csv;
}

}  // namespace actmem

#pragma once
// Reports as people read them on a terminal.

#include <string>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/simulate/plan.h"
#include "actmem/simulate/report.h"

namespace actmem::cli {

// "model graphcast (36.3M parameters), jax bfloat16, batch 1, rollout 1, on tpu-v4 (32.00 GiB)\n", and the
// rules the run does without (describe_rules_off).
std::string describe_run(const CostGraph& graph, const Device& device);
// ", without rules a, b (b not part of this run's profile anyway)", or "" where every rule is on.
std::string describe_rules_off(const CostGraph& graph);
// A "note:" line per Report::notes (accuracy_notes.h): what was measured
// for runs of this kind, where they were validated apart from the rest.
std::string describe_notes(const Report& report);

// Peak against budget, the breakdown, where the peak is, FLOPs and time.
std::string describe_report(const Report& report);
// A line on the compiler's own rematerialisation when the verdict rests on
// it (Report::compiler_floor_bytes); empty otherwise.
std::string describe_compiler_remat(const Report& report);

// "buffers live at the peak:" then one line per buffer, largest first.
std::string describe_peak_buffers(const std::vector<PeakBuffer>& buffers);

}  // namespace actmem::cli

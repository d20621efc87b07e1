#pragma once
// What a simulation predicts for one training step (docs/cost-model.md §2).

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace actmem {

// Device memory split by what holds it.
//   gradients: parameter gradients and the gradients of activations in flight
//   workspace: op temporaries and parameter copies in the activation dtype
struct MemoryBreakdown {
  std::int64_t parameters = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer_state = 0;
  std::int64_t inputs = 0;
  std::int64_t activations = 0;
  std::int64_t workspace = 0;
  std::int64_t reserved = 0;

  std::int64_t total() const {
    return parameters + gradients + optimizer_state + inputs + activations + workspace + reserved;
  }
  // What is allocated after parameters, optimizer state and inputs are resident.
  std::int64_t dynamic() const { return gradients + activations + workspace; }
};

enum class Pass { forward, recompute, backward, optimizer };
std::string to_string(Pass pass);

// Where in the step something happens.
struct StepLocation {
  Pass pass = Pass::forward;
  int step = 0;       // rollout step
  std::string stage;  // stage name, or "loss"
  std::string op;     // op name
  int block = -1;     // edge block index, -1 when not in a blocked edge update
};

// One dynamic buffer live at the peak: an activation, a gradient (of the
// tensor named) or workspace.
struct PeakBuffer {
  std::string tensor;    // the tensor it holds, or whose gradient it is; empty for scratch
  std::string category;  // "activations", "gradients" or "workspace"
  std::int64_t bytes = 0;
};

struct TimelinePoint {
  StepLocation at;
  MemoryBreakdown live;  // excludes nothing: total() is device memory in use
};

struct Report {
  bool fits = false;
  std::int64_t peak_bytes = 0;
  std::int64_t budget_bytes = 0;
  MemoryBreakdown breakdown;  // at the peak
  std::int64_t activation_bytes_after_forward = 0;
  std::int64_t forward_peak_bytes = 0;  // the peak over the forward pass (and loss) alone
  std::int64_t peak_dynamic_bytes = 0;
  // The peak if the compiler recomputes what it can instead of keeping it
  // (JAX: XLA:TPU's own rematerialisation, which it does only when the
  // program is over its limit); peak_bytes when the framework does not.
  // fits holds when peak_bytes is within the budget, or this is within the
  // compiler's limit.
  std::int64_t compiler_floor_bytes = 0;
  double forward_flops = 0;
  double backward_flops = 0;
  double recompute_flops = 0;
  double step_time_s = 0;
  StepLocation peak_at;
  std::vector<TimelinePoint> timeline;   // filled only when asked for
  std::vector<PeakBuffer> live_at_peak;  // largest first; filled only when asked for
  // For the kinds of run validated apart from the rest, what was measured
  // against the framework's own figure (accuracy_notes.h); empty otherwise.
  std::vector<std::string> notes;

  // Recompute FLOPs as a fraction of forward + backward FLOPs.
  double recompute_overhead() const {
    return forward_flops + backward_flops > 0 ? recompute_flops / (forward_flops + backward_flops) : 0.0;
  }
};

nlohmann::json to_json(const Report& report);
nlohmann::json to_json(const StepLocation& location);
nlohmann::json to_json(const MemoryBreakdown& breakdown);
nlohmann::json to_json(const std::vector<PeakBuffer>& buffers);

// Writes the timeline as CSV: index,pass,step,stage,block,op,<categories>,total.
std::string timeline_csv(const Report& report);

}  // namespace actmem

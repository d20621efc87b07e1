#include "memory_kinds.h"

#include "actmem/util/units.h"

namespace actmem::picture {

const std::array<MemoryKind, 7>& memory_kinds() {
  // Okabe–Ito colours (distinguishable with colour-blindness), grey for the reserve.
  static const std::array<MemoryKind, 7> kinds{{
      {"reserved", "device reserve", "#b8b8b8", &MemoryBreakdown::reserved},
      {"parameters", "parameters", "#0072b2", &MemoryBreakdown::parameters},
      {"optimizer_state", "optimizer state", "#56b4e9", &MemoryBreakdown::optimizer_state},
      {"inputs", "inputs", "#009e73", &MemoryBreakdown::inputs},
      {"gradients", "gradients", "#cc79a7", &MemoryBreakdown::gradients},
      {"activations", "activations", "#e69f00", &MemoryBreakdown::activations},
      {"workspace", "workspace", "#d55e00", &MemoryBreakdown::workspace},
  }};
  return kinds;
}

double gib(std::int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kGiB); }

}  // namespace actmem::picture

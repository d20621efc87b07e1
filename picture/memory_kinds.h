#pragma once
// What holds device memory (MemoryBreakdown's fields), with the colour and
// the words each picture uses for it.

#include <array>
#include <cstdint>
#include <string_view>

#include "actmem/simulate/report.h"

namespace actmem::picture {

struct MemoryKind {
  std::string_view key;    // the field's name in the JSON report ("optimizer_state")
  std::string_view label;  // for people ("optimizer state")
  std::string_view color;
  std::int64_t MemoryBreakdown::*bytes;
};

// Every field of MemoryBreakdown, in stacking order: the resident kinds at
// the bottom, what changes op by op on top.
const std::array<MemoryKind, 7>& memory_kinds();

// Bytes in GiB, for axes.
double gib(std::int64_t bytes);

}  // namespace actmem::picture

#pragma once
// Byte arithmetic that cannot silently overflow: sizes in actmem are int64
// and every product of user-given counts goes through these.

#include <cstdint>
#include <optional>

namespace actmem::detail {

inline std::optional<std::int64_t> checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

inline std::optional<std::int64_t> checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

// Largest byte total actmem allows anywhere (2^62): sums of many such
// totals still fit in int64.
inline constexpr std::int64_t kMaxTotalBytes = std::int64_t{1} << 62;

}  // namespace actmem::detail

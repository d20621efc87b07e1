#pragma once
// Byte quantities as people write them: "32GiB", "30 GB", "512MiB", "1e9".
// Binary suffixes (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones
// (kB/KB, MB, GB, TB) powers of 1000; a bare number is bytes.

#include <cstdint>
#include <string>
#include <string_view>

namespace actmem {

// Parses a byte quantity; throws InputError(source, "", ...) on anything else
// (negative, zero, not a number, unknown suffix, beyond 2^62 bytes).
std::int64_t parse_bytes(std::string_view text, const std::string& source);

// "31.25 GiB", "512.00 MiB", "17 B": binary units, two decimals.
std::string format_bytes(std::int64_t bytes);

// "1.5 ms", "2.31 s".
std::string format_seconds(double seconds);

inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;
inline constexpr std::int64_t kGiB = 1024 * kMiB;

}  // namespace actmem

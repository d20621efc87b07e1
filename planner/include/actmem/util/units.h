#pragma once
// Quantities as people write them on a command line. Byte quantities:
// "32GiB", "30 GB", "512MiB", "1e9". Binary suffixes (KiB, MiB, GiB, TiB)
// are powers of 1024, decimal ones (kB/KB, MB, GB, TB) powers of 1000; a
// bare number is bytes. Counts: decimal digits only ("010" is ten).

#include <cstdint>
#include <string>
#include <string_view>

namespace actmem {

// Parses a byte quantity; throws InputError(source, "", ...) on anything else
// (negative, zero, not a number, unknown suffix, beyond 2^62 bytes).
std::int64_t parse_bytes(std::string_view text, const std::string& source);

// An integer from `min` (≥ 0) to `max` written in decimal digits, nothing
// else (no sign, space, base prefix or exponent); throws
// InputError(source, "", "expected an integer from min to max, got …")
// otherwise, quoting what was given unless it is digits.
std::int64_t parse_integer(std::string_view text, const std::string& source, std::int64_t min, std::int64_t max);

// "31.25 GiB", "512.00 MiB", "17 B": binary units, two decimals.
std::string format_bytes(std::int64_t bytes);

// "1.5 ms", "2.31 s".
std::string format_seconds(double seconds);

inline constexpr std::int64_t kKiB = 1024;
inline constexpr std::int64_t kMiB = 1024 * kKiB;
inline constexpr std::int64_t kGiB = 1024 * kMiB;

}  // namespace actmem

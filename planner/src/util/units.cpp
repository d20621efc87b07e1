#include "actmem/util/units.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "actmem/util/error.h"

namespace actmem {
namespace {

struct Suffix {
  std::string_view name;
  double factor;
};

constexpr std::array<Suffix, 12> kSuffixes{{
    {"", 1.0},
    {"B", 1.0},
    {"KiB", 1024.0},
    {"MiB", 1048576.0},
    {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
    {"kB", 1e3},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"K", 1024.0},
}};

}  // namespace

std::int64_t parse_bytes(std::string_view text, const std::string& source) {
  const std::string original{text};
  auto fail = [&]() -> std::int64_t {
    throw InputError(source, "",
                     fmt::format("expected a positive byte size such as 32GiB, 30GB or 512MiB, got '{}'", original));
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  std::size_t number_end = 0;
  while (number_end < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[number_end])) || text[number_end] == '.' ||
          text[number_end] == 'e' || text[number_end] == '+' || text[number_end] == '-')) {
    // 'e' belongs to the number only when followed by a digit or sign ("1e9").
    if (text[number_end] == 'e' &&
        (number_end + 1 >= text.size() || !(std::isdigit(static_cast<unsigned char>(text[number_end + 1])) ||
                                            text[number_end + 1] == '+' || text[number_end + 1] == '-')))
      break;
    ++number_end;
  }
  if (number_end == 0) return fail();
  const std::string number{text.substr(0, number_end)};
  char* parsed_end = nullptr;
  const double value = std::strtod(number.c_str(), &parsed_end);
  if (parsed_end != number.c_str() + number.size()) return fail();
  std::string_view suffix = text.substr(number_end);
  while (!suffix.empty() && std::isspace(static_cast<unsigned char>(suffix.front()))) suffix.remove_prefix(1);
  for (const Suffix& s : kSuffixes) {
    if (s.name == suffix) {
      const double bytes = value * s.factor;
      if (!std::isfinite(bytes) || bytes < 1.0 || bytes > 4.6e18) return fail();
      return static_cast<std::int64_t>(std::llround(bytes));
    }
  }
  return fail();
}

std::int64_t parse_integer(std::string_view text, const std::string& source, std::int64_t min, std::int64_t max) {
  const bool digits =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!digits || error != std::errc{} || end != text.data() + text.size() || value < min || value > max)
    throw InputError(source, "",
                     fmt::format("expected an integer from {} to {}, got {}", min, max,
                                 digits ? std::string{text} : fmt::format("'{}'", text)));
  return value;
}

std::string format_bytes(std::int64_t bytes) {
  const double b = static_cast<double>(bytes);
  const double magnitude = std::fabs(b);
  if (magnitude >= static_cast<double>(kGiB)) return fmt::format("{:.2f} GiB", b / static_cast<double>(kGiB));
  if (magnitude >= static_cast<double>(kMiB)) return fmt::format("{:.2f} MiB", b / static_cast<double>(kMiB));
  if (magnitude >= static_cast<double>(kKiB)) return fmt::format("{:.2f} KiB", b / static_cast<double>(kKiB));
  return fmt::format("{} B", bytes);
}

std::string format_seconds(double seconds) {
  if (seconds >= 1.0) return fmt::format("{:.2f} s", seconds);
  if (seconds >= 1e-3) return fmt::format("{:.1f} ms", seconds * 1e3);
  return fmt::format("{:.1f} us", seconds * 1e6);
}

}  // namespace actmem

#pragma once
// "Did you mean …" for names a user mistyped (presets, devices, commands,
// fields, options).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace actmem {

// The candidate closest to `typed` by edit distance, if it is close enough to
// be a plausible typo (distance at most a third of its length, at least 2).
std::optional<std::string> closest_name(std::string_view typed, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "" — ready to append to an error message.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace actmem

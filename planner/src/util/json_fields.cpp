#include "util/json_fields.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "actmem/util/error.h"
#include "actmem/util/suggest.h"

namespace actmem::detail {
namespace {

constexpr std::size_t kDescribeBytes = 40;
constexpr std::size_t kMaxNameBytes = 256;

// Appends JSON text for `value` to `out`, stopping once `out` holds `limit`
// bytes: each level of nesting adds a byte, so the recursion is bounded too.
void render(const nlohmann::json& value, std::string& out, std::size_t limit) {
  const auto dump = [](const nlohmann::json& v) {
    return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  if (value.is_object() || value.is_array()) {
    out += value.is_object() ? '{' : '[';
    bool first = true;
    for (const auto& [key, item] : value.items()) {
      if (out.size() >= limit) return;
      if (!first) out += ',';
      first = false;
      if (value.is_object()) out += dump(nlohmann::json(key.substr(0, limit))) + ':';
      render(item, out, limit);
    }
    out += value.is_object() ? '}' : ']';
  } else if (value.is_string()) {
    out += dump(nlohmann::json(value.get_ref<const std::string&>().substr(0, limit)));
  } else {
    out += dump(value);
  }
}

// The exact integer a JSON number holds: nullopt for non-numbers and
// fractions; integers beyond int64 clamp to its ends (failing any range).
std::optional<std::int64_t> integer_value(const nlohmann::json& v) {
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  if (v.is_number_unsigned())
    return v.get<std::uint64_t>() > static_cast<std::uint64_t>(kMax) ? kMax : v.get<std::int64_t>();
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (!v.is_number_float()) return std::nullopt;
  const double d = v.get<double>();
  if (!std::isfinite(d) || std::trunc(d) != d) return std::nullopt;
  if (std::fabs(d) >= 9.2e18) return d > 0 ? kMax : std::numeric_limits<std::int64_t>::min();
  return static_cast<std::int64_t>(d);
}

}  // namespace

std::string describe(const nlohmann::json& value) {
  std::string text;
  render(value, text, kDescribeBytes + 1);
  if (text.size() > kDescribeBytes) text = text.substr(0, kDescribeBytes - 3) + "...";
  return text;
}

FieldReader::FieldReader(const nlohmann::json& object, std::string source, std::string pointer)
    : object_(object), source_(std::move(source)), pointer_(std::move(pointer)) {
  if (!object_.is_object()) throw InputError(source_, pointer_, "expected a JSON object, got " + describe(object_));
}

void FieldReader::fail(std::string_view key, const std::string& message) const {
  throw InputError(source_, pointer_to(key), message);
}

bool FieldReader::has(std::string_view key) const { return object_.contains(key); }

const nlohmann::json& FieldReader::value(std::string_view key) const {
  const auto it = object_.find(key);
  if (it == object_.end()) fail(key, "missing required field");
  return *it;
}

std::int64_t FieldReader::positive_int(std::string_view key, std::int64_t max) const {
  const nlohmann::json& v = value(key);
  const std::optional<std::int64_t> n = integer_value(v);
  if (!n || *n < 1) fail(key, "expected a positive integer, got " + describe(v));
  if (*n > max) fail(key, fmt::format("expected a positive integer of at most {}, got {}", max, describe(v)));
  return *n;
}

std::optional<std::int64_t> FieldReader::optional_positive_int(std::string_view key, std::int64_t max) const {
  if (!has(key)) return std::nullopt;
  return positive_int(key, max);
}

std::int64_t FieldReader::non_negative_int(std::string_view key, std::int64_t max) const {
  const nlohmann::json& v = value(key);
  if (v.is_number_integer() && v.get<std::int64_t>() == 0) return 0;
  return positive_int(key, max);
}

bool FieldReader::boolean(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_boolean()) fail(key, "expected true or false, got " + describe(v));
  return v.get<bool>();
}

double FieldReader::positive_number(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_number() || !(v.get<double>() > 0.0)) fail(key, "expected a positive number, got " + describe(v));
  return v.get<double>();
}

std::optional<double> FieldReader::optional_positive_number(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return positive_number(key);
}

double FieldReader::number_in(std::string_view key, double min, double max) const {
  const nlohmann::json& v = value(key);
  if (!v.is_number() || !(v.get<double>() >= min && v.get<double>() <= max))
    fail(key, fmt::format("expected a number from {:g} to {:g}, got {}", min, max, describe(v)));
  return v.get<double>();
}

std::string FieldReader::string(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_string()) fail(key, "expected a string, got " + describe(v));
  return v.get<std::string>();
}

std::optional<std::string> FieldReader::optional_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

std::string FieldReader::name(std::string_view key) const {
  std::string text = string(key);
  if (text.size() > kMaxNameBytes || one_line(text) != text)
    fail(key, fmt::format("expected a name of at most {} printable characters on one line, got {}", kMaxNameBytes,
                          describe(value(key))));
  return text;
}

std::vector<std::string> FieldReader::name_array(std::string_view key, std::int64_t max) const {
  const nlohmann::json& array = value(key);
  if (!array.is_array() || array.size() > static_cast<std::size_t>(max))
    fail(key, fmt::format("expected an array of at most {} names, got {}", max, describe(array)));
  std::vector<std::string> names;
  for (const nlohmann::json& item : array) {
    const std::string* text = item.get_ptr<const std::string*>();
    if (!text || text->size() > kMaxNameBytes || one_line(*text) != *text)
      fail(key, fmt::format("expected names of at most {} printable characters on one line, got {}", kMaxNameBytes,
                            describe(item)));
    names.push_back(*text);
  }
  return names;
}

std::optional<std::string> FieldReader::optional_name(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return name(key);
}

void FieldReader::reject_unknown_fields(const std::vector<std::string>& known) const {
  for (const auto& [key, unused] : object_.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(key, "unknown field" + did_you_mean(key, known));
  }
}

}  // namespace actmem::detail

#include "json_fields.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "actmem/error.h"
#include "actmem/suggest.h"

namespace actmem::detail {

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte is 1-based and points just past the offending character.
    std::size_t line = 1, column = 1;
    const std::size_t end = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') {
        ++line;
        column = 1;
      } else {
        ++column;
      }
    }
    std::string reason = e.what();
    if (const auto cut = reason.find("syntax error"); cut != std::string::npos) reason = reason.substr(cut);
    throw InputError(fmt::format("{}:{}:{}", source, line, column), "", "invalid JSON: " + reason);
  }
}

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open file for reading");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json(text.str(), path);
}

std::string describe(const nlohmann::json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
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
  const bool integral = v.is_number_integer() || (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<std::int64_t>(v.get<double>())));
  if (!integral || v.get<double>() < 1.0) fail(key, "expected a positive integer, got " + describe(v));
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(max) : v.get<double>() > static_cast<double>(max))
    fail(key, fmt::format("expected a positive integer of at most {}, got {}", max, describe(v)));
  return v.is_number_float() ? static_cast<std::int64_t>(v.get<double>()) : v.get<std::int64_t>();
}

std::optional<std::int64_t> FieldReader::optional_positive_int(std::string_view key, std::int64_t max) const {
  if (!has(key)) return std::nullopt;
  return positive_int(key, max);
}

std::int64_t FieldReader::non_negative_int(std::string_view key, std::int64_t max) const {
  const nlohmann::json& v = value(key);
  if (v.is_number_integer() && v.get<std::int64_t>() == 0 && !v.is_number_float()) return 0;
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

std::string FieldReader::string(std::string_view key) const {
  const nlohmann::json& v = value(key);
  if (!v.is_string()) fail(key, "expected a string, got " + describe(v));
  return v.get<std::string>();
}

std::optional<std::string> FieldReader::optional_string(std::string_view key) const {
  if (!has(key)) return std::nullopt;
  return string(key);
}

void FieldReader::reject_unknown_fields(const std::vector<std::string>& known) const {
  for (const auto& [key, unused] : object_.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end())
      fail(key, "unknown field" + did_you_mean(key, known));
  }
}

}  // namespace actmem::detail

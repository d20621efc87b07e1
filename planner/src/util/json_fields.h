#pragma once
// Reading JSON input with errors that name the source and the field.
//
// FieldReader wraps one JSON object found at `pointer` (a JSON pointer, ""
// for the document root) inside `source` (a file name or preset name). Each
// accessor throws InputError(source, pointer + "/" + key, "expected …, got …")
// when the field is missing or has the wrong type or range.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actmem/util/error.h"
#include "util/json_text.h"

namespace actmem::detail {

// A short rendering of a JSON value for messages (-5, "abc", an object cut
// at 40 characters); its cost is bounded whatever the value holds.
std::string describe(const nlohmann::json& value);

class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string source, std::string pointer = "");

  bool has(std::string_view key) const;
  std::string pointer_to(std::string_view key) const { return pointer_ + "/" + pointer_segment(key); }
  const std::string& source() const { return source_; }
  const std::string& pointer() const { return pointer_; }

  std::int64_t positive_int(std::string_view key, std::int64_t max) const;
  std::optional<std::int64_t> optional_positive_int(std::string_view key, std::int64_t max) const;
  std::int64_t non_negative_int(std::string_view key, std::int64_t max) const;
  double positive_number(std::string_view key) const;
  std::optional<double> optional_positive_number(std::string_view key) const;
  // A number within [min, max].
  double number_in(std::string_view key, double min, double max) const;
  bool boolean(std::string_view key) const;
  std::string string(std::string_view key) const;
  std::optional<std::string> optional_string(std::string_view key) const;
  // A string printed to terminals (a model or device name): one printable
  // line (error.h, one_line) of at most 256 bytes.
  std::string name(std::string_view key) const;
  std::optional<std::string> optional_name(std::string_view key) const;
  // An array of at most `max` names (name(): printable, one line).
  std::vector<std::string> name_array(std::string_view key, std::int64_t max) const;
  const nlohmann::json& value(std::string_view key) const;

  // Every key of the object must be one of `known`; otherwise an error that
  // suggests the closest known key.
  void reject_unknown_fields(const std::vector<std::string>& known) const;

  [[noreturn]] void fail(std::string_view key, const std::string& message) const;

 private:
  const nlohmann::json& object_;
  std::string source_;
  std::string pointer_;
};

}  // namespace actmem::detail

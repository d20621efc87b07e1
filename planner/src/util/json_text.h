#pragma once
// JSON text to values, bounded: every file and document actmem reads goes
// through here, so that no input can exhaust the stack or the memory
// (actmem/util/limits.h) and every problem in it is an InputError naming the
// source and the place.

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace actmem::detail {

// Parses JSON text. A syntax error is InputError("source:line:column", "",
// "invalid JSON: …"); a number beyond float64 (1e400), arrays and
// objects nested deeper than kMaxJsonDepth, and a value beyond the
// kMaxJsonValues-th are InputErrors naming the JSON pointer of the value.
nlohmann::json parse_json(std::string_view text, const std::string& source);

// Reads and parses a JSON file of at most kMaxJsonFileBytes; a file that
// cannot be read is an InputError too.
nlohmann::json read_json_file(const std::string& path);

// Whether `path` names an existing regular file (after symbolic links):
// how a preset or catalog name is told from a file's. False for a name
// holding a NUL byte, which no file's name can (the system would read the
// name only up to it, and open another file).
bool names_regular_file(const std::string& path);

}  // namespace actmem::detail

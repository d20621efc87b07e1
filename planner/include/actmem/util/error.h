#pragma once
// Errors that actmem reports to its users.
//
// Bad input (a model file, a plan, a device, a command-line value) is an
// InputError: it carries where the input came from (`source`: a file name,
// a preset, "--budget"), which field inside it (`field`: a JSON pointer such
// as "/grid_nodes", empty when the whole input is meant) and what was
// expected. what() is the full one-line message:
//   "tiny.json: /grid_nodes: expected a positive integer, got -5"
// A bad argument of a library call is an InputError::argument() whose
// source is the argument's name as the library spells it ("batch",
// "rollout", "device", "resolution_deg"); front ends say it their way
// (the CLI's --batch, Python's batch=) with renamed().
// what() is always one printable line of bounded length (one_line()), even
// when the input it quotes holds newlines, control bytes or megabytes.
// "Does not fit" is never an error: it is a result (see Report::fits).

#include <stdexcept>
#include <string>
#include <string_view>

namespace actmem {

class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string field, std::string message);
  static InputError argument(std::string name, std::string message);

  // The same error about argument `name` (a front end's spelling of it).
  InputError renamed(std::string name) const;

  bool is_argument() const { return argument_; }
  const std::string& source() const { return source_; }
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  std::string source_;
  std::string field_;
  std::string message_;
  bool argument_ = false;
};

// `text` made safe to print as one line: control bytes (newlines included),
// DEL, the bytes of the line and paragraph separators and of the
// bidirectional formatting characters (U+061C, U+200E/F, U+202A-E,
// U+2066-9), and bytes that are not valid UTF-8 are written as \xNN; what would
// be longer than kMaxMessageBytes is cut to end in "..." within that length.
// one_line(one_line(t)) == one_line(t).
std::string one_line(std::string_view text);
inline constexpr std::size_t kMaxMessageBytes = 2048;

// One segment of an InputError's field: `key` with "~" and "/" escaped as
// JSON pointers require (RFC 6901), so "/edges/a~1b" names key "a/b".
std::string pointer_segment(std::string_view key);

}  // namespace actmem

#pragma once
// Errors that actmem reports to its users.
//
// Bad input (a model file, a plan, a device, a command-line value) is an
// InputError: it carries where the input came from (`source`: a file name,
// a preset, "--budget"), which field inside it (`field`: a JSON pointer such
// as "/grid_nodes", empty when the whole input is meant) and what was
// expected. what() is the full one-line message:
//   "tiny.json: /grid_nodes: expected a positive integer, got -5"
// "Does not fit" is never an error: it is a result (see Report::fits).

#include <stdexcept>
#include <string>

namespace actmem {

class InputError : public std::runtime_error {
 public:
  InputError(std::string source, std::string field, std::string message);

  const std::string& source() const { return source_; }
  const std::string& field() const { return field_; }
  const std::string& message() const { return message_; }

 private:
  std::string source_;
  std::string field_;
  std::string message_;
};

}  // namespace actmem

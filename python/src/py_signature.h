#pragma once
// The parameters of a module function, bound from Python's arguments as
// Python binds them, with every mistake an InputError naming the function:
// more positional arguments than it takes, an unknown keyword (with the
// closest known one), one value given twice. pybind11's own binding raises
// TypeError with a dump of its signatures instead (docs/api.md promises
// InputError only). The GIL must be held.

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <pybind11/pybind11.h>

namespace actmem::python {

// A default: None, a str, an int or a bool. `Required` has none.
struct Required {};
using Default = std::variant<Required, std::nullptr_t, const char*, std::int64_t, bool>;

struct Parameter {
  const char* name;
  Default default_value;
  bool keyword_only = false;  // after `*`: never positional
};

// Bound values by parameter name.
class Arguments {
 public:
  const pybind11::object& operator[](std::string_view name) const;

 private:
  friend class Signature;
  std::vector<std::pair<std::string_view, pybind11::object>> values_;
};

class Signature {
 public:
  Signature(std::string function, std::vector<Parameter> parameters);

  // InputError(function, "", …) for a mistake in how it was called.
  Arguments bind(const pybind11::args& args, const pybind11::kwargs& kwargs) const;

  const std::string& function() const { return function_; }
  // As Python writes it: "fits(model='graphcast', device='tpu-v4', *, memory=None)".
  std::string text() const;

 private:
  std::string function_;
  std::vector<Parameter> parameters_;
};

}  // namespace actmem::python

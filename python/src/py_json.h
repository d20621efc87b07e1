#pragma once
// Plain Python values <-> JSON: None, bool, int, float, str, list (or
// tuple) and dict with str keys. The GIL must be held.

#include <string>

#include <pybind11/pybind11.h>
#include <nlohmann/json.hpp>

namespace actmem::python {

// InputError(source, JSON pointer of the offending value, …) for anything
// else (a set, a non-str key, an int beyond 64 bits, a NaN, a str with lone
// surrogates), for values nested deeper than kMaxJsonDepth (a dict that
// contains itself) and for more than kMaxJsonValues values, a list or dict
// counted each time it is reached (a list that holds one list twice, thirty
// levels down). Lists and dicts are read from their storage, never through
// a subclass's __iter__.
nlohmann::json to_json(pybind11::handle value, const std::string& source, const std::string& pointer = "");

// A Python str as UTF-8; InputError(source, pointer, …) for anything else.
std::string text_of(pybind11::handle value, const std::string& source, const std::string& pointer = "");

// The name of a value's type, for messages ("int", "set").
std::string type_name(pybind11::handle value);

// Releases `value`'s storage from the leaves up and leaves it an empty
// container (or the scalar it was). Allocates nothing, so it is safe while
// an exception unwinds: nlohmann::json's own destructor allocates a stack
// for a non-empty array or object, and a std::bad_alloc thrown from a
// destructor aborts the interpreter instead of raising MemoryError.
void release(nlohmann::json& value) noexcept;

// Releases a JSON value (release()) when it goes out of scope, before the
// value's own destructor runs: declare it right after the value.
class ReleaseOnExit {
 public:
  explicit ReleaseOnExit(nlohmann::json& value) : value_(value) {}
  ReleaseOnExit(const ReleaseOnExit&) = delete;
  ReleaseOnExit& operator=(const ReleaseOnExit&) = delete;
  ~ReleaseOnExit() { release(value_); }

 private:
  nlohmann::json& value_;
};

// An empty list; MemoryError (not pybind11's RuntimeError) if it cannot be
// allocated.
pybind11::list new_list();

// `value` as plain Python values, consuming it: released (release()) whether
// the conversion succeeds or raises, MemoryError included.
pybind11::object to_python(nlohmann::json&& value);

}  // namespace actmem::python

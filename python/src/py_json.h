#pragma once
// Plain Python values <-> JSON: None, bool, int, float, str, list (or
// tuple) and dict with str keys. The GIL must be held.

#include <string>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace actmem::python {

// InputError(source, JSON pointer of the offending value, …) for anything
// else (a set, a non-str key, an int beyond 64 bits, a NaN, a str with lone
// surrogates), and for values nested deeper than kMaxJsonDepth (a dict that
// contains itself). Lists and dicts are read from their storage, never
// through a subclass's __iter__.
nlohmann::json to_json(pybind11::handle value, const std::string& source, const std::string& pointer = "");

// A Python str as UTF-8; InputError(source, pointer, …) for anything else.
std::string text_of(pybind11::handle value, const std::string& source, const std::string& pointer = "");

// The name of a value's type, for messages ("int", "set").
std::string type_name(pybind11::handle value);

pybind11::object from_json(const nlohmann::json& value);

}  // namespace actmem::python

#pragma once
// Plain Python values <-> JSON: None, bool, int, float, str, list (or
// tuple) and dict with str keys. The GIL must be held.

#include <string>

#include <nlohmann/json.hpp>
#include <pybind11/pybind11.h>

namespace actmem::python {

// InputError(source, JSON pointer of the offending value, …) for anything
// else (a set, a non-str key, an int beyond 64 bits, a NaN).
nlohmann::json to_json(pybind11::handle value, const std::string& source, const std::string& pointer = "");

pybind11::object from_json(const nlohmann::json& value);

}  // namespace actmem::python

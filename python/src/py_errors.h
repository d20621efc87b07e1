#pragma once
// actmem.InputError: a ValueError subclass raised for every actmem::InputError,
// with attributes source, field (a JSON pointer, "" for the whole input) and
// message, and str() "source: field: message" (empty parts left out).
// An argument's error (InputError::argument) names the keyword that
// carries it ("batch").

#include <pybind11/pybind11.h>

namespace actmem::python {

void register_errors(pybind11::module_& module);

}  // namespace actmem::python

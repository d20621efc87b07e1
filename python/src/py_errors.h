#pragma once
// actmem.InputError: a ValueError subclass raised for every actmem::InputError,
// with attributes source, field (a JSON pointer, "" for the whole input) and
// message, and str() "source: field: message" (empty parts left out).
//
// Sources that name a command-line option ("--batch") are renamed to the
// keyword argument that carries the same value in Python ("batch").

#include <pybind11/pybind11.h>

namespace actmem::python {

void register_errors(pybind11::module_& module);

}  // namespace actmem::python

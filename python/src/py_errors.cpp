#include "py_errors.h"

#include <string>

#include "actmem/util/error.h"

namespace py = pybind11;

namespace actmem::python {

namespace {

std::string compose(const std::string& source, const std::string& field, const std::string& message) {
  std::string text;
  if (!source.empty()) text += source + ": ";
  if (!field.empty()) text += field + ": ";
  return text + message;
}

// The Python class, created once when the module is imported (the GIL
// serialises that) and kept for the life of the interpreter.
PyObject* input_error_class = nullptr;

}  // namespace

void register_errors(py::module_& module) {
  input_error_class =
      PyErr_NewExceptionWithDoc("actmem.InputError",
                                "Bad input to actmem (a model, device, plan or argument); a ValueError.\n\n"
                                "Attributes: source (the input: a keyword, file or 'plan'), field (a JSON pointer\n"
                                "inside it, '' for the whole input) and message; str() joins them with ': '.",
                                PyExc_ValueError, nullptr);
  if (input_error_class == nullptr) throw py::error_already_set();
  module.add_object("InputError", py::handle(input_error_class));  // steals no reference: adds one

  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const InputError& e) {
      // Each part one printable line of bounded length, as the C++ what().
      const std::string source = one_line(e.source());
      const std::string field = one_line(e.field());
      const std::string message = one_line(e.message());
      py::object error = py::reinterpret_borrow<py::object>(input_error_class)(compose(source, field, message));
      error.attr("source") = source;
      error.attr("field") = field;
      error.attr("message") = message;
      PyErr_SetObject(input_error_class, error.ptr());
    }
  });
}

}  // namespace actmem::python

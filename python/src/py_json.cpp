#include "py_json.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"

namespace py = pybind11;

namespace actmem::python {

namespace {

// One conversion: the source named in errors, where it is (the JSON
// pointer's segments, joined only for an error) and the values converted so
// far, each container counted every time it is reached, so that a small
// value whose lists repeat one list (x = [x, x], thirty times) is refused
// after kMaxJsonValues values, not expanded to 2^30.
class Conversion {
 public:
  Conversion(const std::string& source, const std::string& pointer) : source_(source), base_(pointer) {}

  nlohmann::json value(py::handle value) {
    if (static_cast<int>(path_.size()) > kMaxJsonDepth)
      fail("expected values nested at most " + std::to_string(kMaxJsonDepth) +
           " levels deep (does a list or dict contain itself?)");
    if (++values_ > kMaxJsonValues)
      fail("expected at most " + std::to_string(kMaxJsonValues) +
           " values in all (lists and dicts count each time they are reached)");
    if (value.is_none()) return nullptr;
    if (py::isinstance<py::bool_>(value)) return value.ptr() == Py_True;
    if (py::isinstance<py::int_>(value)) {
      int overflow = 0;
      const long long n = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
      if (overflow != 0) fail("expected an integer within 64 bits, got a larger one");
      if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
      return static_cast<std::int64_t>(n);
    }
    if (py::isinstance<py::float_>(value)) {
      const double x = PyFloat_AsDouble(value.ptr());
      if (!std::isfinite(x)) fail("expected a finite number, got " + std::to_string(x));
      return x;
    }
    if (py::isinstance<py::str>(value)) return text_of(value, source_, pointer());
    if (py::isinstance<py::dict>(value)) return object(value);
    if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) return array(value);
    fail("expected None, bool, int, float, str, list or dict, got a value of type " + type_name(value));
  }

 private:
  nlohmann::json object(py::handle value) {
    nlohmann::json object = nlohmann::json::object();
    PyObject* key = nullptr;
    PyObject* item = nullptr;
    Py_ssize_t position = 0;
    while (PyDict_Next(value.ptr(), &position, &key, &item)) {
      if (!PyUnicode_Check(key)) fail("expected str keys, got a key of type " + type_name(key));
      const std::string name = text_of(key, source_, pointer());
      path_.push_back(pointer_segment(name));
      object[name] = this->value(item);
      path_.pop_back();
    }
    return object;
  }

  nlohmann::json array(py::handle value) {
    nlohmann::json array = nlohmann::json::array();
    const bool list = PyList_Check(value.ptr());
    // Re-read the size each time: converting an item may run Python code.
    for (Py_ssize_t i = 0; i < (list ? PyList_GET_SIZE(value.ptr()) : PyTuple_GET_SIZE(value.ptr())); ++i) {
      PyObject* item = list ? PyList_GET_ITEM(value.ptr(), i) : PyTuple_GET_ITEM(value.ptr(), i);
      path_.push_back(std::to_string(i));  // within the short-string buffer: no allocation
      array.push_back(this->value(py::reinterpret_borrow<py::object>(item)));
      path_.pop_back();
    }
    return array;
  }

  std::string pointer() const {
    std::string pointer = base_;
    for (const std::string& segment : path_) pointer += "/" + segment;
    return pointer;
  }
  [[noreturn]] void fail(const std::string& message) const { throw InputError(source_, pointer(), message); }

  const std::string& source_;
  const std::string& base_;
  std::vector<std::string> path_;  // segments below base_
  std::int64_t values_ = 0;
};

}  // namespace

std::string type_name(py::handle value) {
  const char* name = Py_TYPE(value.ptr())->tp_name;
  const char* dot = std::strrchr(name, '.');
  return dot ? dot + 1 : name;
}

std::string text_of(py::handle value, const std::string& source, const std::string& pointer) {
  if (!PyUnicode_Check(value.ptr()))
    throw InputError(source, pointer, "expected a string, got a value of type " + type_name(value));
  Py_ssize_t size = 0;
  const char* utf8 = PyUnicode_AsUTF8AndSize(value.ptr(), &size);
  if (utf8 == nullptr) {
    PyErr_Clear();
    throw InputError(source, pointer, "expected a string of valid Unicode, got one with lone surrogates");
  }
  return std::string(utf8, static_cast<std::size_t>(size));
}

nlohmann::json to_json(py::handle value, const std::string& source, const std::string& pointer) {
  return Conversion(source, pointer).value(value);
}

namespace {

// A new reference from the C API, or the Python error it set: pybind11's
// own constructors (py::dict(), py::str(…)) turn a failed allocation into
// RuntimeError, where Python raises MemoryError.
py::object created(PyObject* object) {
  if (object == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(object);
}

py::object python_of(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer: return created(PyLong_FromLongLong(value.get<std::int64_t>()));
    case nlohmann::json::value_t::number_unsigned:
      return created(PyLong_FromUnsignedLongLong(value.get<std::uint64_t>()));
    case nlohmann::json::value_t::number_float: return created(PyFloat_FromDouble(value.get<double>()));
    case nlohmann::json::value_t::string: {
      const std::string& text = value.get_ref<const std::string&>();
      return created(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), nullptr));
    }
    case nlohmann::json::value_t::array: {
      const py::object list = created(PyList_New(0));
      for (const nlohmann::json& item : value) {
        if (PyList_Append(list.ptr(), python_of(item).ptr()) != 0) throw py::error_already_set();
      }
      return list;
    }
    case nlohmann::json::value_t::object: {
      const py::object dict = created(PyDict_New());
      for (const auto& [key, item] : value.items()) {
        const py::object name = created(PyUnicode_DecodeUTF8(key.data(), static_cast<Py_ssize_t>(key.size()), nullptr));
        if (PyDict_SetItem(dict.ptr(), name.ptr(), python_of(item).ptr()) != 0) throw py::error_already_set();
      }
      return dict;
    }
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded: break;
  }
  return py::none();
}

}  // namespace

void release(nlohmann::json& value) noexcept {
  if (value.is_array()) {
    auto& items = value.get_ref<nlohmann::json::array_t&>();
    while (!items.empty()) {
      release(items.back());
      items.pop_back();
    }
  } else if (value.is_object()) {
    auto& members = value.get_ref<nlohmann::json::object_t&>();
    while (!members.empty()) {
      release(members.begin()->second);
      members.erase(members.begin());
    }
  }
}

py::list new_list() { return py::reinterpret_steal<py::list>(created(PyList_New(0)).release()); }

py::object to_python(nlohmann::json&& value) {
  const ReleaseOnExit released(value);
  return python_of(value);
}

}  // namespace actmem::python

#include "py_json.h"

#include <cmath>

#include "actmem/error.h"

namespace py = pybind11;

namespace actmem::python {

namespace {

std::string type_name(py::handle value) { return py::str(py::type::handle_of(value).attr("__name__")); }

// "~" and "/" in keys escaped as JSON pointers require.
std::string escape_key(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

}  // namespace

nlohmann::json to_json(py::handle value, const std::string& source, const std::string& pointer) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) {
    int overflow = 0;
    const long long n = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
    if (overflow != 0) throw InputError(source, pointer, "expected an integer within 64 bits, got " + py::str(value).cast<std::string>());
    return static_cast<std::int64_t>(n);
  }
  if (py::isinstance<py::float_>(value)) {
    const double x = value.cast<double>();
    if (!std::isfinite(x)) throw InputError(source, pointer, "expected a finite number, got " + py::str(value).cast<std::string>());
    return x;
  }
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::dict>(value)) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, item] : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key))
        throw InputError(source, pointer, "expected str keys, got a key of type " + type_name(key));
      const std::string name = key.cast<std::string>();
      object[name] = to_json(item, source, pointer + "/" + escape_key(name));
    }
    return object;
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    nlohmann::json array = nlohmann::json::array();
    std::size_t i = 0;
    for (py::handle item : value) array.push_back(to_json(item, source, pointer + "/" + std::to_string(i++)));
    return array;
  }
  throw InputError(source, pointer,
                   "expected None, bool, int, float, str, list or dict, got a value of type " + type_name(value));
}

py::object from_json(const nlohmann::json& value) {
  switch (value.type()) {
    case nlohmann::json::value_t::null: return py::none();
    case nlohmann::json::value_t::boolean: return py::bool_(value.get<bool>());
    case nlohmann::json::value_t::number_integer: return py::int_(value.get<std::int64_t>());
    case nlohmann::json::value_t::number_unsigned: return py::int_(value.get<std::uint64_t>());
    case nlohmann::json::value_t::number_float: return py::float_(value.get<double>());
    case nlohmann::json::value_t::string: return py::str(value.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list list;
      for (const nlohmann::json& item : value) list.append(from_json(item));
      return list;
    }
    case nlohmann::json::value_t::object: {
      py::dict dict;
      for (const auto& [key, item] : value.items()) dict[py::str(key)] = from_json(item);
      return dict;
    }
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded: break;
  }
  return py::none();
}

}  // namespace actmem::python

#include "py_signature.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "actmem/util/error.h"
#include "actmem/util/suggest.h"
#include "py_json.h"

namespace py = pybind11;

namespace actmem::python {
namespace {

py::object value_of(const Default& d) {
  if (std::holds_alternative<const char*>(d)) return py::str(std::get<const char*>(d));
  if (std::holds_alternative<std::int64_t>(d)) return py::int_(std::get<std::int64_t>(d));
  if (std::holds_alternative<bool>(d)) return py::bool_(std::get<bool>(d));
  return py::none();
}

std::string written(const Default& d) {
  if (std::holds_alternative<const char*>(d)) return fmt::format("'{}'", std::get<const char*>(d));
  if (std::holds_alternative<std::int64_t>(d)) return std::to_string(std::get<std::int64_t>(d));
  if (std::holds_alternative<bool>(d)) return std::get<bool>(d) ? "True" : "False";
  return "None";
}

}  // namespace

const py::object& Arguments::operator[](std::string_view name) const {
  for (const auto& [n, value] : values_)
    if (n == name) return value;
  throw std::logic_error(fmt::format("no parameter '{}'", name));
}

Signature::Signature(std::string function, std::vector<Parameter> parameters)
    : function_(std::move(function)), parameters_(std::move(parameters)) {}

Arguments Signature::bind(const py::args& args, const py::kwargs& kwargs) const {
  std::vector<std::string> positional, names;
  for (const Parameter& p : parameters_) {
    names.emplace_back(p.name);
    if (!p.keyword_only) positional.emplace_back(p.name);
  }
  if (args.size() > positional.size())
    throw InputError(function_, "",
                     positional.empty()
                         ? fmt::format("takes no positional arguments, got {}", args.size())
                         : fmt::format("takes at most {} positional argument{} ({}), got {}", positional.size(),
                                       positional.size() > 1 ? "s" : "", fmt::join(positional, ", "), args.size()));
  for (const auto& [key, unused] : kwargs) {
    const std::string name = text_of(key, function_);
    if (std::find(names.begin(), names.end(), name) == names.end())
      throw InputError(function_, "",
                       fmt::format("unexpected keyword argument '{}'{}; it takes {}", name, did_you_mean(name, names),
                                   fmt::join(names, ", ")));
  }
  Arguments bound;
  for (std::size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& p = parameters_[i];
    const bool given_positionally = i < args.size() && !p.keyword_only;
    const bool given_by_keyword = kwargs.contains(p.name);
    if (given_positionally && given_by_keyword)
      throw InputError(function_, "", fmt::format("got two values for '{}' (by position and by keyword)", p.name));
    if (!given_positionally && !given_by_keyword && std::holds_alternative<Required>(p.default_value))
      throw InputError(function_, "", fmt::format("missing the argument '{}'", p.name));
    bound.values_.emplace_back(p.name, given_positionally ? py::object(args[i])
                                       : given_by_keyword ? py::object(kwargs[p.name])
                                                          : value_of(p.default_value));
  }
  return bound;
}

std::string Signature::text() const {
  std::vector<std::string> parts;
  bool starred = false;
  for (const Parameter& p : parameters_) {
    if (p.keyword_only && !starred) {
      parts.emplace_back("*");
      starred = true;
    }
    parts.push_back(std::holds_alternative<Required>(p.default_value)
                        ? std::string(p.name)
                        : fmt::format("{}={}", p.name, written(p.default_value)));
  }
  return fmt::format("{}({})", function_, fmt::join(parts, ", "));
}

}  // namespace actmem::python

// The Python module's conversion of plain Python values to JSON
// (python/src/py_json.h), alone, in an embedded interpreter. The input is a
// little stack program that builds a value: scalars of every kind the
// module meets (huge ints, NaN, lone surrogates, sets), lists, tuples and
// dicts of the values below them, the same object pushed again (shared
// sub-lists, which the conversion must count each time it reaches them),
// and a list that holds itself. Checks: the conversion ends in an
// InputError with a clear message or in JSON of at most kMaxJsonValues
// values that converts back and forth unchanged; and whenever the value,
// expanded as the conversion reads it, holds more than kMaxJsonValues
// values or nests deeper than kMaxJsonDepth, it is refused.
#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <vector>

#include <pybind11/embed.h>

#include "actmem/util/limits.h"
#include "fuzz_support.h"
#include "py_json.h"

namespace py = pybind11;

namespace {

// Reads the program's bytes; zeros past the end.
class Program {
 public:
  Program(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  bool done() const { return at_ >= size_; }
  std::uint8_t byte() { return at_ < size_ ? data_[at_++] : 0; }
  std::uint64_t word() {
    std::uint64_t w = 0;
    for (int i = 0; i < 8; ++i) w = (w << 8) | byte();
    return w;
  }
  std::string bytes(std::size_t n) {
    std::string out;
    while (n-- > 0 && !done()) out.push_back(static_cast<char>(byte()));
    return out;
  }

 private:
  const std::uint8_t* data_;
  std::size_t size_, at_ = 0;
};

// Pops the top `n` (at most the stack's size), oldest first.
std::vector<py::object> pop(std::vector<py::object>& stack, std::size_t n) {
  n = std::min(n, stack.size());
  std::vector<py::object> out(stack.end() - static_cast<std::ptrdiff_t>(n), stack.end());
  stack.resize(stack.size() - n);
  return out;
}

py::object build(Program& p) {
  std::vector<py::object> stack;
  int steps = 0;
  while (!p.done() && ++steps < 4096) {
    switch (p.byte() % 12) {
      case 0: stack.push_back(py::none()); break;
      case 1: stack.push_back(py::int_(static_cast<std::int64_t>(p.word()))); break;
      case 2:  // beyond 64 bits
        stack.push_back(
            py::reinterpret_steal<py::object>(PyNumber_Lshift(py::int_(1).ptr(), py::int_(64 + p.byte() % 64).ptr())));
        break;
      case 3: {
        const std::uint64_t bits = p.word();
        double x;
        std::memcpy(&x, &bits, sizeof x);
        stack.push_back(py::float_(x));  // NaN and infinities included
        break;
      }
      case 4: {  // any bytes: invalid UTF-8 becomes lone surrogates
        const std::string text = p.bytes(p.byte() % 16);
        stack.push_back(py::reinterpret_steal<py::object>(
            PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "surrogateescape")));
        break;
      }
      case 5: {
        py::list list;
        for (py::object& item : pop(stack, p.byte() % 8)) list.append(item);
        stack.push_back(list);
        break;
      }
      case 6: {
        py::list items;
        for (py::object& item : pop(stack, p.byte() % 8)) items.append(item);
        stack.push_back(py::tuple(items));
        break;
      }
      case 7: {  // keys and values in turn; an unhashable key is left out
        py::dict dict;
        std::vector<py::object> items = pop(stack, 2 * (p.byte() % 4));
        for (std::size_t i = 0; i + 1 < items.size(); i += 2)
          if (PyDict_SetItem(dict.ptr(), items[i].ptr(), items[i + 1].ptr()) != 0) PyErr_Clear();
        stack.push_back(dict);
        break;
      }
      case 8:  // the same object again: a shared sub-value
        if (!stack.empty()) stack.push_back(stack[stack.size() - 1 - p.byte() % stack.size()]);
        break;
      case 9:  // a list that holds itself
        if (!stack.empty() && PyList_Check(stack.back().ptr())) PyList_Append(stack.back().ptr(), stack.back().ptr());
        break;
      case 10: stack.push_back(py::reinterpret_steal<py::object>(PySet_New(nullptr))); break;
      case 11: stack.push_back(py::bool_(p.byte() % 2 == 1)); break;
    }
  }
  return stack.empty() ? py::none() : stack.back();
}

// Values of `value` as the conversion reads it (each container every time
// it is reached; dict keys are not values), saturating above kMaxJsonValues,
// and its depth up to kMaxJsonDepth + 1: memoised per object, so a value
// shared a billion times costs one visit.
struct Extent {
  std::int64_t values = 0;
  int depth = 0;
};
// A value inside itself (reached again on its own path) is endless.
constexpr Extent kEndless{actmem::kMaxJsonValues + 1, actmem::kMaxJsonDepth + 1};
Extent extent_of(PyObject* value, std::map<PyObject*, Extent>& seen, std::set<PyObject*>& path) {
  if (const auto it = seen.find(value); it != seen.end()) return it->second;
  if (!path.insert(value).second) return kEndless;
  Extent e{1, 0};
  const auto add = [&](PyObject* item) {
    const Extent x = extent_of(item, seen, path);
    e.values = std::min(e.values + x.values, actmem::kMaxJsonValues + 1);
    e.depth = std::max(e.depth, x.depth + 1);
  };
  if (PyList_Check(value))
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); ++i) add(PyList_GET_ITEM(value, i));
  else if (PyTuple_Check(value))
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); ++i) add(PyTuple_GET_ITEM(value, i));
  else if (PyDict_Check(value)) {
    PyObject *key, *item;
    Py_ssize_t position = 0;
    while (PyDict_Next(value, &position, &key, &item)) add(item);
  }
  e.depth = std::min(e.depth, kEndless.depth);
  path.erase(value);
  seen[value] = e;
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static py::scoped_interpreter interpreter;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using actmem::fuzz::expect;
  Program program(data, size);
  py::object value = build(program);
  std::map<PyObject*, Extent> seen;
  std::set<PyObject*> path;
  const Extent extent = extent_of(value.ptr(), seen, path);
  try {
    nlohmann::json json = actmem::python::to_json(value, "fuzz");
    expect(extent.values <= actmem::kMaxJsonValues, "a value of more than kMaxJsonValues values is refused");
    expect(extent.depth <= actmem::kMaxJsonDepth, "a value nested deeper than kMaxJsonDepth is refused");
    const nlohmann::json again = actmem::python::to_json(actmem::python::to_python(nlohmann::json(json)), "again");
    expect(again == json, "the JSON converts back and forth unchanged");
  } catch (const actmem::InputError& e) {
    actmem::fuzz::expect_clear(e);
  }
  return 0;  // lists that hold themselves are cycles Python's collector frees
}

#include "py_inputs.h"

#include <fmt/format.h>

#include "actmem/cost/memory_rules.h"
#include "actmem/plan/plan_document.h"
#include "actmem/plan/plan_json.h"
#include "actmem/simulate/simulator.h"
#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/units.h"
#include "graph_cache.h"
#include "py_json.h"

namespace py = pybind11;

namespace actmem::python {

namespace {

// A byte quantity given as a positive int or a string such as "24GiB".
std::int64_t bytes_from(py::handle value, const std::string& keyword) {
  if (py::isinstance<py::str>(value)) return parse_bytes(text_of(value, keyword), keyword);
  if (py::isinstance<py::int_>(value) && !py::isinstance<py::bool_>(value)) {
    const nlohmann::json n = to_json(value, keyword);
    if (n.get<std::int64_t>() <= 0 || n.get<std::int64_t>() > (std::int64_t{1} << 62))
      throw InputError(keyword, "", "expected a positive number of bytes up to 2^62, got " + n.dump());
    return n.get<std::int64_t>();
  }
  throw InputError(keyword, "",
                   "expected bytes as an int or a string such as \"24GiB\", got a value of type " + type_name(value));
}

// An int keyword (batch, rollout), range-checked by validate(RunOptions).
// Anything with __index__ (numpy's integers) counts as an int; bool does not.
std::int64_t integer_from(py::handle value, const std::string& keyword) {
  PyObject* index = py::isinstance<py::bool_>(value) ? nullptr : PyNumber_Index(value.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    throw InputError(keyword, "", "expected an int, got a value of type " + type_name(value));
  }
  return to_json(py::reinterpret_steal<py::object>(index), keyword).get<std::int64_t>();
}

// None, or a list or tuple of rule names (memory_rules.h).
std::vector<std::string> rule_names_from(py::handle value) {
  if (value.is_none()) return {};
  if (!py::isinstance<py::list>(value) && !py::isinstance<py::tuple>(value))
    throw InputError("rules_off", "",
                     "expected a list of rule names (actmem.rules()), got a value of type " + type_name(value));
  const py::sequence items = py::reinterpret_borrow<py::sequence>(value);
  if (items.size() > static_cast<std::size_t>(kMaxRulesOff))
    throw InputError("rules_off", "",
                     fmt::format("expected at most {} rule names, got {}", kMaxRulesOff, items.size()));
  std::vector<std::string> names;
  for (const py::handle item : items) names.push_back(text_of(item, "rules_off"));
  check_rule_names(names, "rules_off");
  return names;
}

}  // namespace

bool flag_from(py::handle value, const std::string& keyword) {
  if (!py::isinstance<py::bool_>(value))
    throw InputError(keyword, "", "expected True or False, got a value of type " + type_name(value));
  return value.ptr() == Py_True;
}

ModelDescription model_from(py::handle model) {
  if (py::isinstance<py::str>(model)) return load_model(text_of(model, "model"));
  if (py::isinstance<py::dict>(model)) return model_from_json(to_json(model, "model"), "model");
  throw InputError("model", "",
                   "expected a preset name, a model file or a dict, got a value of type " + type_name(model));
}

Device device_from(py::handle device) {
  if (py::isinstance<py::str>(device)) return load_device(text_of(device, "device"));
  if (py::isinstance<py::dict>(device)) return device_from_json(to_json(device, "device"), "device", "");
  throw InputError("device", "",
                   "expected a catalog id, a device file or a dict, got a value of type " + type_name(device));
}

Target target_from(const RunArguments& a) {
  const ModelDescription model = model_from(a.model);
  RunOptions run;
  run.dtype = parse_dtype(text_of(a.dtype, "dtype"), "dtype");
  run.framework = parse_framework(text_of(a.framework, "framework"), "framework");
  run.optimizer = parse_optimizer(text_of(a.optimizer, "optimizer"), "optimizer");
  run.autocast = parse_autocast(text_of(a.autocast, "autocast"), "autocast");
  run.batch = integer_from(a.batch, "batch");
  run.rollout = integer_from(a.rollout, "rollout");
  for (const std::string& name : rule_names_from(a.rules_off)) run.add_rule_off(name);
  validate(run);
  Target target;
  target.device = a.memory.is_none() ? device_from(a.device) : device_with_memory(bytes_from(a.memory, "memory"));
  target.budget_bytes = a.budget.is_none() ? target.device.memory_bytes
                                           : budget_within(target.device, bytes_from(a.budget, "budget"), "budget");
  {
    const py::gil_scoped_release unlocked;
    target.graph = graph_cache().get(model, run);
  }
  return target;
}

Plan plan_from(py::handle plan, const CostGraph& graph) {
  if (py::isinstance<py::dict>(plan)) return plan_from_document(to_json(plan, "plan"), graph, "plan");
  if (!py::isinstance<py::str>(plan))
    throw InputError("plan", "",
                     "expected a built-in plan name, a plan file or a dict, got a value of type " + type_name(plan));
  return PlanChoice(text_of(plan, "plan")).plan(graph);
}

}  // namespace actmem::python

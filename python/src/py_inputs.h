#pragma once
// The keyword arguments every planning function takes, turned into what the
// library needs. Errors are InputErrors whose source is the keyword:
//   model      preset name, model JSON file, or dict (a model description)
//   device     catalog id, device JSON file, or dict (a device description)
//   memory     a device known only by its memory: int bytes or "24GiB";
//              replaces `device`
//   budget     int bytes or "30GiB"; default the device's memory, never more
//   batch, rollout, dtype, framework, optimizer, autocast: the run (run_options.h)
//   rules_off  None, or a list or tuple of memory rule names (actmem.rules())
//              the run does without

#include <cstdint>
#include <memory>
#include <string>

#include <pybind11/pybind11.h>

#include "actmem/cost/cost_graph.h"
#include "actmem/model/device.h"
#include "actmem/model/model.h"
#include "actmem/model/run_options.h"
#include "actmem/simulate/plan.h"

namespace actmem::python {

// As Python passed them: every conversion is the module's own, so that a
// value of the wrong type or range is an InputError naming the keyword,
// never the binding's TypeError.
struct RunArguments {
  pybind11::object model;
  pybind11::object device;
  pybind11::object memory;
  pybind11::object budget;
  pybind11::object batch;
  pybind11::object rollout;
  pybind11::object dtype;
  pybind11::object framework;
  pybind11::object optimizer;
  pybind11::object autocast;
  pybind11::object rules_off;
};

// What a call plans for. `graph` may be shared with other calls and threads.
struct Target {
  std::shared_ptr<const CostGraph> graph;
  Device device;
  std::int64_t budget_bytes = 0;
};

// Reads the arguments (GIL held), then releases the GIL while the graph is
// built or found in the cache.
Target target_from(const RunArguments& arguments);

ModelDescription model_from(pybind11::handle model);
Device device_from(pybind11::handle device);

// A bool keyword (timeline, nested_regions): True or False only.
bool flag_from(pybind11::handle value, const std::string& keyword);

// A plan given as a built-in name ("deepmind:4"), a plan file path, or a
// dict (a plan document, full or partial) for the target's graph.
Plan plan_from(pybind11::handle plan, const CostGraph& graph);

}  // namespace actmem::python

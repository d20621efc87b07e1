// The Python module `actmem` (docs/api.md): the library's scheduler API
// with plain Python values. Results are dicts and lists of ints, floats,
// strs and bools; a plan is its JSON document as a dict. Bad input raises
// actmem.InputError (a ValueError); "does not fit" is a result.
//
// Every function releases the GIL while it computes, so Python threads can
// plan concurrently; cost graphs are cached across calls (graph_cache.h).
#include <pybind11/pybind11.h>

#include "actmem/actmem.h"
#include "py_errors.h"
#include "py_inputs.h"
#include "py_json.h"

namespace py = pybind11;
using namespace py::literals;

namespace actmem::python {
namespace {

nlohmann::json plan_json(const Plan& plan, const CostGraph& graph) {
  nlohmann::json out = plan_to_json(plan, graph.stages());
  out["stages"] = graph.stages();
  return out;
}

// The timeline as Python values, row by row: never one JSON value of every
// row, which would double the memory the timeline takes. The GIL must be held.
py::list timeline_rows(const Report& report) {
  py::list rows = new_list();
  for (const TimelinePoint& p : report.timeline) {
    nlohmann::json point = to_json(p.at);
    const ReleaseOnExit released(point);
    point["live"] = to_json(p.live);
    point["total_bytes"] = p.live.total();
    rows.append(to_python(std::move(point)));
  }
  return rows;
}

RunArguments arguments(py::object model, py::object device, py::object memory, py::object budget, py::object batch,
                       py::object rollout, py::object dtype, py::object framework, py::object optimizer,
                       py::object autocast) {
  return RunArguments{std::move(model), std::move(device),    std::move(memory),    std::move(budget),  batch, rollout,
                      std::move(dtype), std::move(framework), std::move(optimizer), std::move(autocast)};
}

// Fills a JSON value by `compute` without the GIL, then converts it to
// Python values with the GIL; its storage is released without allocating
// (py_json.h: ReleaseOnExit).
template <typename Compute>
py::object json_without_gil(Compute&& compute) {
  nlohmann::json out;
  const ReleaseOnExit released(out);
  {
    const py::gil_scoped_release unlocked;
    compute(out);
  }
  return to_python(std::move(out));
}

SolverOptions solver_options(py::handle nested_regions) {
  SolverOptions options;
  options.allow_nested_regions = flag_from(nested_regions, "nested_regions");
  return options;
}

py::object fits_py(py::object model, py::object device, py::object memory, py::object budget, py::object batch,
                   py::object rollout, py::object dtype, py::object framework, py::object optimizer,
                   py::object autocast, py::object nested_regions) {
  const Target t =
      target_from(arguments(model, device, memory, budget, batch, rollout, dtype, framework, optimizer, autocast));
  const SolverOptions options = solver_options(nested_regions);
  return json_without_gil([&](nlohmann::json& out) {
    const FitAnswer a = fits(*t.graph, t.device, t.budget_bytes, options);
    out = {{"fits", a.fits},
           {"peak_bytes", a.peak_bytes},
           {"min_peak_bytes", a.min_peak_bytes},
           {"budget_bytes", a.budget_bytes},
           {"device", t.device.id},
           {"plan", plan_json(a.plan, *t.graph)},
           {"description", describe(a.plan, t.graph->stages())},
           {"report", to_json(a.report)}};
  });
}

py::object plan_py(py::object model, py::object device, py::object memory, py::object budget, py::object batch,
                   py::object rollout, py::object dtype, py::object framework, py::object optimizer,
                   py::object autocast, py::object nested_regions) {
  const Target t =
      target_from(arguments(model, device, memory, budget, batch, rollout, dtype, framework, optimizer, autocast));
  const SolverOptions options = solver_options(nested_regions);
  return json_without_gil([&](nlohmann::json& document) {
    const Solution s = solve(*t.graph, t.device, t.budget_bytes, options);
    nlohmann::json exports = trainer_exports(*t.graph, t.device, t.budget_bytes, s.plan, s.report);
    const ReleaseOnExit released_exports(exports);
    document = plan_document_json(*t.graph, t.device, t.budget_bytes, s.plan, s.report, exports);
  });
}

py::object simulate_py(py::object model, py::object device, py::object memory, py::object budget, py::object batch,
                       py::object rollout, py::object dtype, py::object framework, py::object optimizer,
                       py::object autocast, py::object plan, py::object timeline) {
  const Target t =
      target_from(arguments(model, device, memory, budget, batch, rollout, dtype, framework, optimizer, autocast));
  const Plan p = plan_from(plan, *t.graph);
  SimulationOptions options;
  options.record_timeline = flag_from(timeline, "timeline");
  Report r;
  py::object result = json_without_gil([&](nlohmann::json& out) {
    r = simulate(*t.graph, t.device, t.budget_bytes, p, options);
    out = to_json(r);
    out["plan"] = plan_json(p, *t.graph);
  });
  if (options.record_timeline) result["timeline"] = timeline_rows(r);
  return result;
}

py::object pareto_py(py::object model, py::object device, py::object memory, py::object budget, py::object batch,
                     py::object rollout, py::object dtype, py::object framework, py::object optimizer,
                     py::object autocast, py::object nested_regions) {
  const Target t =
      target_from(arguments(model, device, memory, budget, batch, rollout, dtype, framework, optimizer, autocast));
  const SolverOptions options = solver_options(nested_regions);
  return json_without_gil([&](nlohmann::json& points) {
    points = nlohmann::json::array();
    for (const ParetoPoint& p : pareto_frontier(*t.graph, t.device, options)) {
      // Reports judged against the budget asked for.
      Report r = p.report;
      r.budget_bytes = t.budget_bytes;
      r.fits = r.peak_bytes <= t.budget_bytes;
      points.push_back({{"plan", plan_json(p.plan, *t.graph)},
                        {"description", describe(p.plan, t.graph->stages())},
                        {"report", to_json(r)}});
    }
  });
}

// Defines a function taking the run arguments (py_inputs.h), then `extra`.
template <typename F, typename... Extra>
void def_planning(py::module_& m, const char* name, F f, const char* doc, Extra... extra) {
  m.def(name, f, doc, "model"_a = "graphcast", "device"_a = "tpu-v4", py::kw_only(), "memory"_a = py::none(),
        "budget"_a = py::none(), "batch"_a = 1, "rollout"_a = 1, "dtype"_a = "bfloat16", "framework"_a = "jax",
        "optimizer"_a = "adam", "autocast"_a = "cuda", extra...);
}

}  // namespace
}  // namespace actmem::python

PYBIND11_MODULE(actmem, m) {
  using namespace actmem;
  using namespace actmem::python;
  m.doc() =
      "actmem: will a GraphCast-style training step fit in device memory, and with which checkpoint plan.\n\n"
      "Every planning function takes model (preset, file or dict), device (catalog id, file or dict)\n"
      "and keywords memory, budget (int bytes or '24GiB'), batch, rollout, dtype ('bfloat16',\n"
      "'float32'), framework ('jax', 'pytorch'), optimizer ('adam', 'sgd'), autocast ('cuda', 'cpu': whose\n"
      "torch.autocast lists a PyTorch bfloat16 step follows). fits, plan and pareto also take\n"
      "nested_regions=True: search regions nested inside regions too (exact, slower). See docs/api.md.";
  m.attr("__version__") = ACTMEM_VERSION;
  register_errors(m);

  m.def(
      "models", [] { return to_python(preset_names()); }, "Names of the built-in model presets.");
  m.def(
      "model",
      [](py::object model) {
        const ModelDescription description = model_from(model);
        nlohmann::json j = to_json(description);
        const ReleaseOnExit released(j);
        j["fingerprint"] = fingerprint(description);
        j["parameter_count"] = parameter_count(description);
        return to_python(std::move(j));
      },
      "The model description (preset, file or dict) as a dict, with its fingerprint and parameter count.",
      "model"_a = "graphcast");
  m.def(
      "devices",
      [] {
        py::list list = new_list();
        for (const Device& d : device_catalog()) list.append(to_python(to_json(d)));
        return list;
      },
      "The device catalog: a list of dicts (id, name, memory_bytes, reserve_bytes, FLOP/s, bandwidth, source).");
  m.def(
      "device", [](py::object device) { return to_python(to_json(device_from(device))); },
      "A device (catalog id, file or dict) as a dict.", "device"_a);

  def_planning(m, "fits", &fits_py,
               "Does one training step fit within the budget? {fits, peak_bytes, min_peak_bytes, budget_bytes,\n"
               "device, plan {stages, checkpoints, edge_blocks}, description, report}. The plan is the fastest\n"
               "that fits or, if none does, the one with the least memory; min_peak_bytes is the least any\n"
               "plan needs on this device.",
               "nested_regions"_a = false);
  def_planning(m, "plan", &plan_py,
               "The plan document (format actmem.plan, version 1, docs/plan-format.md) of the fastest plan that\n"
               "fits, as a dict; if none fits, of the least-memory plan (document['predicted']['fits'] is False).",
               "nested_regions"_a = false);
  def_planning(m, "simulate", &simulate_py,
               "The report of one training step under `plan`: a built-in name ('none', 'full', 'every:K',\n"
               "'deepmind', 'deepmind:B'), a plan file, or a plan document dict (full, or only checkpoints and\n"
               "edge_blocks). timeline=True adds the memory after every op.",
               "plan"_a = "none", "timeline"_a = false);
  def_planning(m, "pareto", &pareto_py,
               "Plans not dominated in (peak_bytes, step_time_s), by increasing peak: a list of\n"
               "{plan, description, report}; each report's fits is judged against the budget.",
               "nested_regions"_a = false);
}

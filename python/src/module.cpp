// The Python module `actmem` (docs/api.md): the library's scheduler API
// with plain Python values. Results are dicts and lists of ints, floats,
// strs and bools; a plan is its JSON document as a dict. Bad input raises
// actmem.InputError (a ValueError); "does not fit" is a result.
//
// Every function releases the GIL while it computes, so Python threads can
// plan concurrently; cost graphs are cached across calls (graph_cache.h).
#include <pybind11/pybind11.h>

#include "actmem/actmem.h"
#include "actmem/cost/memory_rules.h"
#include "py_errors.h"
#include "py_inputs.h"
#include "py_json.h"
#include "py_signature.h"

namespace py = pybind11;

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

// The run's parameters every planning function takes (py_inputs.h), then its own.
Signature planning(const char* function, std::vector<Parameter> own) {
  std::vector<Parameter> parameters{{"model", "graphcast"},           {"device", "tpu-v4"},
                                    {"memory", nullptr, true},        {"budget", nullptr, true},
                                    {"batch", std::int64_t{1}, true}, {"rollout", std::int64_t{1}, true},
                                    {"dtype", "bfloat16", true},      {"framework", "jax", true},
                                    {"optimizer", "adam", true},      {"autocast", "cuda", true},
                                    {"rules_off", nullptr, true}};
  for (Parameter& p : own) {
    p.keyword_only = true;
    parameters.push_back(p);
  }
  return Signature(function, std::move(parameters));
}

RunArguments run_arguments(const Arguments& a) {
  return RunArguments{a["model"], a["device"],    a["memory"],    a["budget"],   a["batch"],    a["rollout"],
                      a["dtype"], a["framework"], a["optimizer"], a["autocast"], a["rules_off"]};
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

py::object fits_py(const Arguments& a) {
  const Target t = target_from(run_arguments(a));
  const SolverOptions options = solver_options(a["nested_regions"]);
  return json_without_gil([&](nlohmann::json& out) {
    const FitAnswer answer = fits(*t.graph, t.device, t.budget_bytes, options);
    out = {{"fits", answer.fits},
           {"peak_bytes", answer.peak_bytes},
           {"min_peak_bytes", answer.min_peak_bytes},
           {"budget_bytes", answer.budget_bytes},
           {"device", t.device.id},
           {"plan", plan_json(answer.plan, *t.graph)},
           {"description", describe(answer.plan, t.graph->stages())},
           {"report", to_json(answer.report)}};
  });
}

py::object plan_py(const Arguments& a) {
  const Target t = target_from(run_arguments(a));
  const SolverOptions options = solver_options(a["nested_regions"]);
  return json_without_gil([&](nlohmann::json& document) {
    const Solution s = solve(*t.graph, t.device, t.budget_bytes, options);
    nlohmann::json exports = trainer_exports(*t.graph, t.device, t.budget_bytes, s.plan, s.report);
    const ReleaseOnExit released_exports(exports);
    document = plan_document_json(*t.graph, t.device, t.budget_bytes, s.plan, s.report, exports);
  });
}

py::object simulate_py(const Arguments& a) {
  const Target t = target_from(run_arguments(a));
  const Plan p = plan_from(a["plan"], *t.graph);
  SimulationOptions options;
  options.record_timeline = flag_from(a["timeline"], "timeline");
  Report r;
  py::object result = json_without_gil([&](nlohmann::json& out) {
    r = simulate(*t.graph, t.device, t.budget_bytes, p, options);
    out = to_json(r);
    out["plan"] = plan_json(p, *t.graph);
  });
  if (options.record_timeline) result["timeline"] = timeline_rows(r);
  return result;
}

py::object pareto_py(const Arguments& a) {
  const Target t = target_from(run_arguments(a));
  const SolverOptions options = solver_options(a["nested_regions"]);
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

// Defines `signature`'s function: its arguments bound by the signature
// (every mistake an InputError), its docstring led by the signature.
template <typename F>
void def(py::module_& m, Signature signature, F f, const std::string& doc) {
  const std::string name = signature.function();
  const std::string docstring = signature.text() + "\n\n" + doc;
  m.def(
      name.c_str(),
      [signature = std::move(signature), f](const py::args& args, const py::kwargs& kwargs) {
        return f(signature.bind(args, kwargs));
      },
      docstring.c_str());
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
      "torch.autocast lists a PyTorch bfloat16 step follows), rules_off (a list of memory rules to predict\n"
      "without: rules() lists them). fits, plan and pareto also take\n"
      "nested_regions=True: search regions nested inside regions too (exact, slower). See docs/api.md.";
  m.attr("__version__") = ACTMEM_VERSION;
  register_errors(m);

  def(
      m, Signature("models", {}), [](const Arguments&) { return to_python(preset_names()); },
      "Names of the built-in model presets.");
  def(
      m, Signature("model", {{"model", "graphcast"}}),
      [](const Arguments& a) {
        const ModelDescription description = model_from(a["model"]);
        nlohmann::json j = to_json(description);
        const ReleaseOnExit released(j);
        j["fingerprint"] = fingerprint(description);
        j["parameter_count"] = parameter_count(description);
        return to_python(std::move(j));
      },
      "The model description (preset, file or dict) as a dict, with its fingerprint and parameter count.");
  def(
      m, Signature("devices", {}),
      [](const Arguments&) {
        py::list list = new_list();
        for (const Device& d : device_catalog()) list.append(to_python(to_json(d)));
        return list;
      },
      "The device catalog: a list of dicts (id, name, memory_bytes, reserve_bytes, FLOP/s, bandwidth, source).");
  def(
      m, Signature("rules", {}),
      [](const Arguments&) {
        py::list list = new_list();
        for (const RuleCard& rule : rule_cards()) list.append(to_python(to_json(rule)));
        return list;
      },
      "The memory rules: a list of dicts (name, framework, applies, effect, journal); a name in rules_off=\n"
      "predicts without that rule (docs/rules/).");
  def(
      m, Signature("device", {{"device", Required{}}}),
      [](const Arguments& a) { return to_python(to_json(device_from(a["device"]))); },
      "A device (catalog id, file or dict) as a dict.");

  def(m, planning("fits", {{"nested_regions", false}}), &fits_py,
      "Does one training step fit within the budget? {fits, peak_bytes, min_peak_bytes, budget_bytes,\n"
      "device, plan {stages, checkpoints, edge_blocks}, description, report}. The plan is the fastest\n"
      "that fits or, if none does, the one with the least memory; min_peak_bytes is the least any\n"
      "plan needs on this device.");
  def(m, planning("plan", {{"nested_regions", false}}), &plan_py,
      "The plan document (format actmem.plan, version 1, docs/plan-format.md) of the fastest plan that\n"
      "fits, as a dict; if none fits, of the least-memory plan (document['predicted']['fits'] is False).");
  def(m, planning("simulate", {{"plan", "none"}, {"timeline", false}}), &simulate_py,
      "The report of one training step under `plan`: a built-in name ('none', 'full', 'every:K',\n"
      "'deepmind', 'deepmind:B'), a plan file, or a plan document dict (full, or only checkpoints and\n"
      "edge_blocks). timeline=True adds the memory after every op.");
  def(m, planning("pareto", {{"nested_regions", false}}), &pareto_py,
      "Plans not dominated in (peak_bytes, step_time_s), by increasing peak: a list of\n"
      "{plan, description, report}; each report's fits is judged against the budget.");
}

// The memory rules (actmem/cost/memory_rules.h): each one changes a
// prediction of a small model when switched off. tests/rules/witnesses.json
// names, for each rule, a run where it does (found by
// scripts/find-rule-witnesses.py, which also writes the figures on and off
// into it for docs/rules/), with the rules that would hide its effect
// switched off in both runs ("also_off"); this test computes both again.
#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "actmem/cost/memory_rules.h"
#include "actmem/model/device.h"
#include "actmem/plan/builtin_plans.h"
#include "actmem/plan/plan_document.h"
#include "actmem/plan/plan_json.h"
#include "actmem/simulate/simulator.h"
#include "actmem/solve/solver.h"
#include "actmem/util/error.h"
#include "test_models.h"

namespace actmem {
namespace {

// Rules whose switching off changed no figure on any of the witness
// search's runs (scripts/find-rule-witnesses.py), and what was seen instead
// (none now: a rule that adds a transient away from every peak shows in the
// memory over the whole step, timeline_bytes).
const std::map<std::string, std::string> kNoWitnessYet{};

nlohmann::json witnesses() {
  std::ifstream in(ACTMEM_SOURCE_DIR "/tests/rules/witnesses.json");
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

ModelDescription witness_model(const std::string& name) {
  if (name == "small4") {  // graphcast-small with 4 processor steps: a latitude-longitude grid
    nlohmann::json j = to_json(load_model("graphcast-small"));
    j.erase("fingerprint");
    j["processor_steps"] = 4;
    return model_from_json(j, "small4");
  }
  for (const testing::ImplementationCase& c : testing::kImplementationCases)
    if (!c.concat_trick && name == std::string("tiny-") + c.name) return testing::tiny_model(4, c);
  FAIL("unknown witness model " << name);
  return {};
}

RunOptions witness_run(const nlohmann::json& w) {
  RunOptions run;
  run.framework = parse_framework(w.at("framework").get<std::string>(), "framework");
  run.dtype = parse_dtype(w.at("dtype").get<std::string>(), "dtype");
  run.batch = w.at("batch").get<std::int64_t>();
  run.rollout = w.at("rollout").get<std::int64_t>();
  for (const std::string& name : w.value("also_off", std::vector<std::string>{})) run.add_rule_off(name);
  return run;
}

// The witness's figure for the graph: of a simulation under its plan, or
// the solver's least peak where it names no plan.
std::int64_t figure(const nlohmann::json& w, const CostGraph& graph) {
  const Device device = load_device("tpu-v4");
  const std::string name = w.at("figure").get<std::string>();
  if (!w.contains("plan")) {
    REQUIRE(name == "min_peak_bytes");
    return solve(graph, device, device.memory_bytes).min_peak_bytes;
  }
  const nlohmann::json& p = w.at("plan");
  const Plan plan =
      p.is_string() ? builtin_plan(p.get<std::string>(), graph.chain()) : plan_from_document(p, graph, "witness");
  SimulationOptions options;
  options.record_timeline = name == "timeline_bytes";
  const Report r = simulate(graph, device, device.memory_bytes, plan, options);
  std::int64_t timeline_bytes = 0;  // the memory over the whole step: each op's total after it, summed
  for (const TimelinePoint& point : r.timeline) timeline_bytes += point.live.total();
  const std::map<std::string, std::int64_t> figures{
      {"timeline_bytes", timeline_bytes},
      {"peak_bytes", r.peak_bytes},
      {"forward_peak_bytes", r.forward_peak_bytes},
      {"activation_bytes_after_forward", r.activation_bytes_after_forward},
      {"compiler_floor_bytes", r.compiler_floor_bytes}};
  REQUIRE(figures.count(name) == 1);
  return figures.at(name);
}

TEST_CASE("rules: every rule changes its witness's prediction when switched off") {
  const nlohmann::json all = witnesses();
  for (const auto& [name, w] : all.items()) {
    CAPTURE(name);
    const RuleCard* rule = find_rule(name);
    REQUIRE(rule);
    const ModelDescription model = witness_model(w.at("model").get<std::string>());
    RunOptions run = witness_run(w);
    CHECK(rule_applies(*rule, run, model.implementation));
    const std::int64_t on = figure(w, CostGraph::build(model, run));
    run.add_rule_off(name);
    const std::int64_t off = figure(w, CostGraph::build(model, run));
    CHECK(on != off);
  }
}

TEST_CASE("rules: each rule has a witness, or is listed with the reason it has none yet") {
  const nlohmann::json all = witnesses();
  std::set<std::string> names;
  for (const RuleCard& rule : rule_cards()) {
    CAPTURE(rule.name);
    CHECK(names.insert(std::string(rule.name)).second);  // names are unique
    CHECK(all.contains(rule.name) != (kNoWitnessYet.count(std::string(rule.name)) == 1));
    CHECK(!rule.effect.empty());
    CHECK(!rule.journal.empty());
  }
  for (const auto& [name, reason] : kNoWitnessYet) CHECK(find_rule(name));
}

TEST_CASE("rules: a rule that does not apply to a run changes nothing when switched off") {
  // A PyTorch rule in a JAX run, a float32 rule in bfloat16, a batch-1 rule at batch 2.
  const ModelDescription model = testing::tiny_model(4);
  for (const auto& [name, batch, dtype] : {std::tuple{"torch.slices_are_views", 1, DType::bfloat16},
                                           std::tuple{"xla.silu.float32_output_not_written", 1, DType::bfloat16},
                                           std::tuple{"xla.edge_update.inputs_recompute_silu", 2, DType::bfloat16}}) {
    CAPTURE(name);
    RunOptions run;
    run.batch = batch;
    run.dtype = dtype;
    CHECK_FALSE(rule_applies(*find_rule(name), run, model.implementation));
    const Device device = load_device("tpu-v4");
    const CostGraph on = CostGraph::build(model, run);
    const Plan plan = builtin_plan("every:2", on.chain());
    run.add_rule_off(name);
    CHECK(simulate(on, device, device.memory_bytes, plan).peak_bytes ==
          simulate(CostGraph::build(model, run), device, device.memory_bytes, plan).peak_bytes);
  }
}

TEST_CASE("rules: an unknown rule name is an InputError that suggests the closest") {
  RunOptions run;
  run.add_rule_off("xla.scan.holds_frist_carry");
  try {
    (void)CostGraph::build(testing::tiny_model(4), run);
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.is_argument());
    CHECK(std::string(e.what()).find("did you mean 'xla.scan.holds_first_carry'") != std::string::npos);
  }
  CHECK_THROWS_AS(check_rule_names(std::vector<std::string>{"nope"}, "--rule-off"), InputError);
}

TEST_CASE("rules: a plan document records the rules its run did without, and reads them back") {
  RunOptions run;
  run.rollout = 2;
  run.add_rule_off("xla.scan.holds_first_carry");
  run.add_rule_off("xla.scan.copies_targets");
  CHECK(run.rules_off == std::vector<std::string>{"xla.scan.copies_targets", "xla.scan.holds_first_carry"});
  const CostGraph graph = CostGraph::build(testing::tiny_model(4), run);
  const Device device = load_device("tpu-v4");
  const Plan plan = builtin_plan("none", graph.chain());
  const nlohmann::json doc =
      plan_document_json(graph, device, device.memory_bytes, plan, simulate(graph, device, device.memory_bytes, plan),
                         nlohmann::json::object());
  CHECK(doc.at("run").at("rules_off") == nlohmann::json(run.rules_off));
  const PlanDocument read = plan_document_from_json(doc, "plan.json");
  REQUIRE(read.run);
  CHECK(read.run->rules_off == run.rules_off);

  nlohmann::json edited = doc;
  edited["run"]["rules_off"] = {"xla.scan.holds_frist_carry"};
  try {
    (void)plan_document_from_json(edited, "plan.json");
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK(e.source() == "plan.json");
    CHECK(e.field() == "/run/rules_off");
  }
  // Every rule on: the document has no rules_off, as before rules could be switched off.
  const CostGraph full = CostGraph::build(testing::tiny_model(4), RunOptions{});
  CHECK_FALSE(plan_document_json(full, device, device.memory_bytes, plan,
                                 simulate(full, device, device.memory_bytes, plan), nlohmann::json::object())
                  .at("run")
                  .contains("rules_off"));
}

}  // namespace
}  // namespace actmem

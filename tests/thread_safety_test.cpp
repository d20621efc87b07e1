// Concurrent calls on shared objects give the serial answers (actmem.h's
// thread-safety contract). Meant to run under ThreadSanitizer too
// (ACTMEM_TSAN=ON, scripts/test-api.sh), which turns any data race into a
// failure; without it the test still checks that results do not change.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "actmem/actmem.h"
#include "actmem/plan/builtin_plans.h"
#include "test_models.h"

using namespace actmem;

namespace {

using Job = std::function<std::string()>;

// Threads running concurrently; ACTMEM_TEST_THREADS overrides.
int thread_count() {
  if (const char* text = std::getenv("ACTMEM_TEST_THREADS")) return std::max(2, std::atoi(text));
  return 4;
}

// Runs every job in `jobs` from `threads` threads at once, each thread
// starting at a different job and going round `rounds` times, and returns
// what each thread got per job (exceptions as "exception: what()").
std::vector<std::vector<std::string>> run_concurrently(const std::vector<Job>& jobs, int threads, int rounds) {
  std::vector<std::vector<std::string>> got(static_cast<std::size_t>(threads), std::vector<std::string>(jobs.size()));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r) {
        for (std::size_t k = 0; k < jobs.size(); ++k) {
          const std::size_t j = (k + static_cast<std::size_t>(t)) % jobs.size();
          std::string result;
          try {
            result = jobs[j]();
          } catch (const std::exception& e) {
            result = std::string{"exception: "} + e.what();
          }
          std::string& slot = got[static_cast<std::size_t>(t)][j];
          if (r == 0 || slot == result)
            slot = result;
          else
            slot = "changed between rounds: " + result;
        }
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  return got;
}

std::vector<std::string> run_serially(const std::vector<Job>& jobs) {
  std::vector<std::string> results;
  for (const Job& job : jobs) {
    try {
      results.push_back(job());
    } catch (const std::exception& e) {
      results.push_back(std::string{"exception: "} + e.what());
    }
  }
  return results;
}

void check_all_equal(const std::vector<std::string>& serial, const std::vector<std::vector<std::string>>& concurrent) {
  for (std::size_t t = 0; t < concurrent.size(); ++t)
    for (std::size_t j = 0; j < serial.size(); ++j) {
      CAPTURE(t);
      CAPTURE(j);
      CHECK(concurrent[t][j] == serial[j]);
    }
}

std::string plan_key(const Plan& plan, const CostGraph& graph) { return plan_to_json(plan, graph.stages()).dump(); }

RunOptions pytorch_run() {
  RunOptions run;
  run.framework = Framework::pytorch;
  run.batch = 2;
  return run;
}

}  // namespace

TEST_SUITE("thread safety") {
  // First in the file: the catalogs are initialised by whichever thread
  // comes first, while the others wait.
  TEST_CASE("threads: the first concurrent lookups of presets and devices agree") {
    std::vector<Job> jobs;
    for (const std::string& name : preset_names()) jobs.push_back([name] { return to_json(load_model(name)).dump(); });
    jobs.push_back([] { return to_json(load_device("tpu-v4")).dump(); });
    jobs.push_back([] { return std::to_string(device_catalog().size()); });
    jobs.push_back([] { return to_json(device_with_memory(24 * kGiB)).dump(); });
    jobs.push_back([] {
      try {
        load_device("tpu-v9");
        return std::string{"no error"};
      } catch (const InputError& e) {
        return std::string{e.what()};
      }
    });
    const auto concurrent = run_concurrently(jobs, thread_count(), 1);
    check_all_equal(run_serially(jobs), concurrent);
  }

  TEST_CASE("threads: cost graphs built concurrently are the graph built serially") {
    const ModelDescription model = testing::tiny_model(6);
    const Device device = load_device("a100-40gb");
    const Job job = [&] {
      const CostGraph graph = CostGraph::build(model, pytorch_run());
      const Plan plan = builtin_plan("deepmind", graph.chain());
      return std::to_string(graph.ops().size()) + " " + std::to_string(graph.tensors().size()) + " " +
             to_json(simulate(graph, device, device.memory_bytes, plan)).dump();
    };
    const std::vector<Job> jobs{job};
    check_all_equal(run_serially(jobs), run_concurrently(jobs, thread_count(), 2));
  }

  TEST_CASE("threads: simulations of GraphCast plans on one shared graph give the serial reports") {
    const CostGraph graph = CostGraph::build(load_model("graphcast-small"), pytorch_run());
    const Device device = load_device("a100-40gb");
    std::vector<Job> jobs;
    for (const std::string name : {"none", "full", "every:2", "deepmind", "deepmind:4"}) {
      const Plan plan = builtin_plan(name, graph.chain());
      jobs.push_back([&graph, &device, plan] {
        SimulationOptions options;
        options.record_timeline = true;
        const Report r = simulate(graph, device, device.memory_bytes, plan, options);
        return to_json(r).dump() + timeline_csv(r);
      });
    }
    check_all_equal(run_serially(jobs), run_concurrently(jobs, thread_count(), 2));
  }

  TEST_CASE("threads: architectures registered while other threads build graphs and read models") {
    // Aliases of GraphCast under other names: their graphs are GraphCast's.
    auto build = [](const ModelDescription& m, const RunOptions& run) {
      ModelDescription g = m;
      g.architecture = "graphcast";
      return CostGraph::build(g, run);
    };
    auto count = [](const ModelDescription& m) {
      ModelDescription g = m;
      g.architecture = "graphcast";
      return parameter_count(g);
    };
    const int aliases = 8;
    const ModelDescription model = testing::tiny_model(2);
    const std::size_t ops = CostGraph::build(model, RunOptions{}).ops().size();
    std::vector<std::thread> pool;
    std::vector<std::string> failures(static_cast<std::size_t>(thread_count()));
    pool.emplace_back([&] {
      for (int k = 0; k < aliases; ++k) register_architecture({"alias-" + std::to_string(k), {}, +build, +count});
    });
    for (int t = 1; t < thread_count(); ++t) {
      pool.emplace_back([&, t] {
        for (int round = 0; round < 20; ++round) {
          nlohmann::json j = testing::tiny_model_json(2);
          j["architecture"] = "alias-" + std::to_string(round % aliases);
          try {
            const ModelDescription m = model_from_json(j, "alias.json");  // once registered
            if (CostGraph::build(m, RunOptions{}).ops().size() != ops || parameter_count(m) != parameter_count(model))
              failures[static_cast<std::size_t>(t)] = "an alias built another graph";
          } catch (const InputError& e) {
            if (std::string{e.what()}.find("/architecture: expected one of") == std::string::npos)
              failures[static_cast<std::size_t>(t)] = e.what();
          }
          if (CostGraph::build(model, RunOptions{}).ops().size() != ops)
            failures[static_cast<std::size_t>(t)] = "graph";
          if (architecture_names().front() != "graphcast") failures[static_cast<std::size_t>(t)] = "names";
        }
      });
    }
    for (std::thread& thread : pool) thread.join();
    for (const std::string& failure : failures) CHECK(failure.empty());
    const std::vector<std::string> names = architecture_names();
    CHECK(names.size() == 1 + aliases);
    nlohmann::json j = testing::tiny_model_json(2);
    j["architecture"] = "alias-3";
    CHECK(CostGraph::build(model_from_json(j, "alias.json"), RunOptions{}).ops().size() == ops);
  }

  // The solver searches thousands of plans per call; a small model keeps
  // this quick under ThreadSanitizer.
  TEST_CASE("threads: solve, fits, pareto and plan documents on one shared graph give the serial answers") {
    const CostGraph graph = CostGraph::build(testing::tiny_model(3), pytorch_run());
    const Device device = load_device("a100-40gb");

    std::vector<Job> jobs;
    const Solution least = minimum_memory(graph, device);
    jobs.push_back([&] {
      const Solution s = minimum_memory(graph, device);
      return std::to_string(s.min_peak_bytes) + plan_key(s.plan, graph) + to_json(s.report).dump();
    });
    // Budgets from below the least peak (does not fit) to the whole device.
    for (const std::int64_t budget : {least.min_peak_bytes - 1, least.min_peak_bytes + 8 * kMiB, device.memory_bytes}) {
      jobs.push_back([&graph, &device, budget] {
        const FitAnswer a = fits(graph, device, budget);
        return std::to_string(a.fits) + " " + std::to_string(a.min_peak_bytes) + plan_key(a.plan, graph) +
               to_json(a.report).dump();
      });
    }
    jobs.push_back([&] {
      std::string out;
      for (const ParetoPoint& p : pareto_frontier(graph, device))
        out += plan_key(p.plan, graph) + to_json(p.report).dump() + "\n";
      return out;
    });
    const Plan deepmind = builtin_plan("deepmind:2", graph.chain());
    jobs.push_back([&] {
      const nlohmann::json document = plan_to_document(graph, device, device.memory_bytes, deepmind);
      const Plan again = plan_from_document(document, graph, "document");
      return document.dump() + (again == deepmind ? "round trip" : "round trip differs");
    });

    const std::vector<std::string> serial = run_serially(jobs);
    for (const std::string& result : serial) {
      CAPTURE(result.substr(0, 200));
      CHECK(result.rfind("exception", 0) != 0);
      CHECK(result.find("round trip differs") == std::string::npos);
    }
    check_all_equal(serial, run_concurrently(jobs, thread_count(), 1));
  }
}

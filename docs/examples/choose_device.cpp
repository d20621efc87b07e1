// A scheduler's use of actmem: for each job, the cheapest catalog device on
// which one training step fits, and the largest per-device batch that fits
// there (with the plan that makes it fit).
//
// "Cheapest" here is the least device memory, a stand-in for a price list:
// replace `cost_of` with your cluster's prices. Jobs are evaluated in
// parallel: actmem's calls are safe from many threads (actmem/actmem.h).
//
// Build: see docs/examples/CMakeLists.txt.
// Run:   choose_device [max_batch [model ...]]   (default: 8 graphcast-small graphcast)
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <future>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <actmem/actmem.h>

namespace {

struct Job {
  std::string name;
  std::string model;  // preset or model JSON file
  actmem::RunOptions run;
};

struct Choice {
  actmem::Device device;
  std::int64_t batch = 0;
  actmem::FitAnswer answer;  // at that batch
};

double cost_of(const actmem::Device& device) { return static_cast<double>(device.memory_bytes); }

// The answer for `job` at `batch` on `device`, with the device's memory as
// the budget. Graphs depend on the run (batch), not on the device, so they
// are built once per batch and shared.
class JobEvaluator {
 public:
  explicit JobEvaluator(Job job) : job_(std::move(job)), model_(actmem::load_model(job_.model)) {}

  actmem::FitAnswer fits(const actmem::Device& device, std::int64_t batch) {
    return actmem::fits(graph(batch), device);
  }

 private:
  const actmem::CostGraph& graph(std::int64_t batch) {
    auto it = graphs_.find(batch);
    if (it == graphs_.end()) {
      actmem::RunOptions run = job_.run;
      run.batch = batch;
      it = graphs_.emplace(batch, actmem::CostGraph::build(model_, run)).first;
    }
    return it->second;
  }

  Job job_;
  actmem::ModelDescription model_;
  std::map<std::int64_t, actmem::CostGraph> graphs_;
};

// The largest batch in 1..max_batch that fits (fitting is monotone in the
// batch), with its answer; nullopt if batch 1 does not fit.
std::optional<Choice> largest_batch(JobEvaluator& job, const actmem::Device& device, std::int64_t max_batch) {
  actmem::FitAnswer one = job.fits(device, 1);
  if (!one.fits) return std::nullopt;
  Choice best{device, 1, std::move(one)};
  std::int64_t low = 1, high = max_batch + 1;  // fits at low, not known to fit at high
  while (high - low > 1) {
    const std::int64_t mid = low + (high - low) / 2;
    actmem::FitAnswer answer = job.fits(device, mid);
    if (answer.fits) {
      low = mid;
      best = Choice{device, mid, std::move(answer)};
    } else {
      high = mid;
    }
  }
  return best;
}

std::optional<Choice> choose(const Job& job, std::int64_t max_batch) {
  std::vector<actmem::Device> devices = actmem::device_catalog();
  std::stable_sort(devices.begin(), devices.end(),
                   [](const actmem::Device& a, const actmem::Device& b) { return cost_of(a) < cost_of(b); });
  JobEvaluator evaluator(job);
  for (const actmem::Device& device : devices)
    if (std::optional<Choice> choice = largest_batch(evaluator, device, max_batch)) return choice;
  return std::nullopt;
}

actmem::RunOptions run_with(actmem::Framework framework, std::int64_t rollout) {
  actmem::RunOptions run;
  run.framework = framework;
  run.rollout = rollout;
  return run;
}

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t max_batch = argc > 1 ? std::max(1LL, std::atoll(argv[1])) : 8;
  std::vector<std::string> models(argv + std::min(argc, 2), argv + argc);
  if (models.empty()) models = {"graphcast-small", "graphcast"};
  // Each model trained two ways.
  std::vector<Job> jobs;
  for (const std::string& model : models) {
    jobs.push_back({model + ", JAX, 1 step", model, run_with(actmem::Framework::jax, 1)});
    jobs.push_back({model + ", PyTorch, 4 steps", model, run_with(actmem::Framework::pytorch, 4)});
  }
  try {
    std::vector<std::future<std::optional<Choice>>> pending;
    for (const Job& job : jobs) pending.push_back(std::async(std::launch::async, choose, job, max_batch));
    int unplaced = 0;
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      const std::optional<Choice> choice = pending[i].get();
      if (!choice) {
        std::cout << jobs[i].name << ": no catalog device fits even batch 1\n";
        ++unplaced;
        continue;
      }
      const actmem::Report& r = choice->answer.report;
      std::cout << jobs[i].name << ": " << choice->device.id << ", batch " << choice->batch << " (peak "
                << actmem::format_bytes(r.peak_bytes) << " of " << actmem::format_bytes(choice->device.memory_bytes)
                << ", recompute +" << static_cast<int>(100.0 * r.recompute_overhead() + 0.5) << "% FLOPs)\n";
    }
    return unplaced == 0 ? 0 : 1;
  } catch (const actmem::InputError& e) {
    std::cerr << "choose_device: error: " << e.what() << '\n';
    return 2;
  }
}

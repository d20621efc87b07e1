#include "graph_cache.h"

#include <nlohmann/json.hpp>

namespace actmem::python {

namespace {

// Every field of the model (name included: it appears in plan documents)
// and of the run.
std::string key_of(const ModelDescription& model, const RunOptions& run) {
  return to_json(model).dump() + to_json(run).dump();
}

}  // namespace

std::shared_ptr<const CostGraph> GraphCache::get(const ModelDescription& model, const RunOptions& run) {
  const std::string key = key_of(model, run);
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it)
      if (it->first == key) {
        entries_.splice(entries_.begin(), entries_, it);
        return entries_.front().second;
      }
  }
  auto graph = std::make_shared<const CostGraph>(CostGraph::build(model, run));
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& entry : entries_)
    if (entry.first == key) return entry.second;
  entries_.emplace_front(key, graph);
  if (entries_.size() > capacity_) entries_.pop_back();
  return graph;
}

GraphCache& graph_cache() {
  static GraphCache cache(16);
  return cache;
}

}  // namespace actmem::python

#pragma once
// Cost graphs recently built, shared by calls from any thread: schedulers
// ask about the same model and run many times. Holds at most `capacity`
// graphs, dropping the least recently used; a graph handed out stays valid
// while its shared_ptr lives.

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "actmem/cost/cost_graph.h"

namespace actmem::python {

class GraphCache {
 public:
  explicit GraphCache(std::size_t capacity) : capacity_(capacity) {}

  // The graph of (model, run), built outside the lock on a miss (two
  // threads missing at once may both build; one result is kept).
  std::shared_ptr<const CostGraph> get(const ModelDescription& model, const RunOptions& run);

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const CostGraph>>;
  std::size_t capacity_;
  std::mutex mutex_;
  std::list<Entry> entries_;  // most recently used first
};

// The module's cache (16 graphs).
GraphCache& graph_cache();

}  // namespace actmem::python

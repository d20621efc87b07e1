#include "solve/search_context.h"

#include <algorithm>

#include "actmem/simulate/simulator.h"

namespace actmem::detail {

SearchContext::SearchContext(ChainModel& model, const SearchSpace& space)
    : model_(model), space_(space), classes_(model.class_count()), edges_(edges_per_stage(model.graph().chain())) {}

std::vector<std::int64_t> SearchContext::choices(int s) const {
  using FirstStage = ChainModel::FirstStage;
  const FirstStage first = model_.has_top_level_ahead() && s == 0 ? model_.first_stage() : FirstStage::in_region;
  const std::int64_t edges = edges_[static_cast<std::size_t>(s)];
  if (edges <= 0)
    return first == FirstStage::plain_blocked ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{1};
  // The plan condition: its stage in blocks, the condition stages after it not.
  const auto& readers = model_.condition_stages();
  const int last = model_.condition();
  const bool reader = std::binary_search(readers.begin(), readers.end(), s);
  if (reader && s > last) return {1};
  std::vector<std::int64_t> out;
  for (std::int64_t b : space_.block_choices) {
    const std::int64_t capped = std::min(b, edges);
    if (reader && s == last && capped == 1) continue;
    if ((first == FirstStage::plain && capped > 1) || (first == FirstStage::plain_blocked && capped == 1)) continue;
    if (std::find(out.begin(), out.end(), capped) == out.end()) out.push_back(capped);
  }
  return out;
}

std::vector<std::int64_t> SearchContext::boundary_key(int p, const ClassGrads& grads) const {
  std::vector<std::int64_t> out;
  for (int c = 0; c < classes_; ++c) {
    const auto part = model_.boundary(c, p, grads[static_cast<std::size_t>(c)]);
    out.insert(out.end(), part.begin(), part.end());
    out.push_back(kEndOfClass);
  }
  return out;
}

}  // namespace actmem::detail

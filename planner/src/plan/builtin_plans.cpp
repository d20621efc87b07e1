#include "actmem/plan/builtin_plans.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/suggest.h"
#include "actmem/util/units.h"

namespace actmem {
namespace {

// [first, last] of the stages with `role`, which the builder declares
// contiguous; {0, -1} if there are none.
std::pair<int, int> role_range(std::span<const Stage> chain, StageRole role) {
  int first = 0, last = -1;
  for (int s = 0; s < static_cast<int>(chain.size()); ++s) {
    if (chain[static_cast<std::size_t>(s)].role != role) continue;
    if (last < 0) first = s;
    last = s;
  }
  return {first, last};
}

// The K of "every:K" or B of "deepmind:B", from 1 to `max`.
std::int64_t parse_suffix(std::string_view name, std::string_view prefix, std::int64_t max) {
  try {
    return parse_integer(name.substr(prefix.size()), "plan", 1, max);
  } catch (const InputError&) {
    throw InputError::argument("plan",
                               fmt::format("expected {}N with N an integer from 1 to {}, got '{}'", prefix, max, name));
  }
}

}  // namespace

std::vector<std::string> builtin_plan_names() { return {"none", "full", "every:K", "deepmind", "deepmind:B"}; }

Plan builtin_plan(std::string_view name, std::span<const Stage> chain) {
  Plan p = empty_plan(stage_names(chain));
  const int n = static_cast<int>(chain.size());
  if (name == "none") return p;
  if (name == "full") {
    for (int s = 0; s < n; ++s) p.checkpoints.push_back({s, s, {}});
    return p;
  }
  auto group_stages = [&](std::int64_t k) {
    const auto [first, last] = role_range(chain, StageRole::processor);
    for (int s = first; s <= last; s += static_cast<int>(k))
      p.checkpoints.push_back({s, std::min(last, s + static_cast<int>(k) - 1), {}});
  };
  if (name.starts_with("every:")) {
    group_stages(parse_suffix(name, "every:", kMaxStagesPerGroup));
    return p;
  }
  if (name == "deepmind" || name.starts_with("deepmind:")) {
    const std::int64_t blocks = name == "deepmind" ? 8 : parse_suffix(name, "deepmind:", kMaxEdgeBlocks);
    group_stages(3);
    for (int s = 0; s < n; ++s) {
      const Stage& stage = chain[static_cast<std::size_t>(s)];
      if (stage.role != StageRole::encoder && stage.role != StageRole::decoder) continue;
      p.checkpoints.push_back({s, s, {}});
      p.edge_blocks[static_cast<std::size_t>(s)] = std::max<std::int64_t>(1, std::min(blocks, stage.edge_rows));
    }
    std::sort(p.checkpoints.begin(), p.checkpoints.end(),
              [](const Region& a, const Region& b) { return a.from < b.from; });
    return p;
  }
  throw InputError::argument(
      "plan", fmt::format("'{}' is not a plan file or a built-in plan (none, full, every:K, deepmind, deepmind:B){}",
                          name, did_you_mean(name, {"none", "full", "deepmind"})));
}

}  // namespace actmem

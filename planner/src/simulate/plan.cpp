#include "actmem/simulate/plan.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/suggest.h"
#include "actmem/util/units.h"
#include "util/json_fields.h"

namespace actmem {
namespace {

int processor_begin(const std::vector<std::string>&) { return 2; }
int processor_end(const std::vector<std::string>& stages) { return static_cast<int>(stages.size()) - 1; }

// The K of "every:K" or B of "deepmind:B", from 1 to `max`.
std::int64_t parse_suffix(std::string_view name, std::string_view prefix, std::int64_t max, const std::string& source) {
  try {
    return parse_integer(name.substr(prefix.size()), source, 1, max);
  } catch (const InputError&) {
    throw InputError(source, "",
                     fmt::format("expected {}N with N an integer from 1 to {}, got '{}'", prefix, max, name));
  }
}

int stage_index(const nlohmann::json& value, const std::vector<std::string>& stages, const std::string& source,
                const std::string& pointer) {
  if (!value.is_string()) throw InputError(source, pointer, "expected a stage name, got " + detail::describe(value));
  const std::string name = value.get<std::string>();
  const auto it = std::find(stages.begin(), stages.end(), name);
  if (it == stages.end())
    throw InputError(source, pointer,
                     fmt::format("unknown stage '{}'{}; stages are encoder, mesh_edge_embed, "
                                 "processor.0..processor.{}, decoder",
                                 name, did_you_mean(name, stages), stages.size() - 4));
  return static_cast<int>(it - stages.begin());
}

// Parses a list of regions at nesting level `depth` (1: top level) that
// must lie within [lo, hi] and not overlap.
std::vector<Region> parse_regions(const nlohmann::json& list, const std::vector<std::string>& stages,
                                  const std::string& source, const std::string& pointer, int lo, int hi, int depth) {
  if (!list.is_array()) throw InputError(source, pointer, "expected a list of regions, got " + detail::describe(list));
  if (depth > kMaxRegionDepth && !list.empty())
    throw InputError(source, pointer, fmt::format("regions nested more than {} levels deep", kMaxRegionDepth));
  std::vector<Region> regions;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = fmt::format("{}/{}", pointer, i);
    const detail::FieldReader in(list[i], source, at);
    in.reject_unknown_fields({"from", "to", "inner"});
    Region r;
    r.from = stage_index(in.value("from"), stages, source, at + "/from");
    r.to = stage_index(in.value("to"), stages, source, at + "/to");
    if (r.from > r.to)
      throw InputError(source, at,
                       fmt::format("region runs backwards: '{}' comes after '{}'",
                                   stages[static_cast<std::size_t>(r.from)], stages[static_cast<std::size_t>(r.to)]));
    if (r.from < lo || r.to > hi)
      throw InputError(source, at,
                       fmt::format("inner region {}..{} lies outside its enclosing region {}..{}",
                                   stages[static_cast<std::size_t>(r.from)], stages[static_cast<std::size_t>(r.to)],
                                   stages[static_cast<std::size_t>(lo)], stages[static_cast<std::size_t>(hi)]));
    if (in.has("inner"))
      r.inner = parse_regions(in.value("inner"), stages, source, at + "/inner", r.from, r.to, depth + 1);
    regions.push_back(std::move(r));
  }
  std::vector<std::size_t> order(regions.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](std::size_t a, std::size_t b) { return regions[a].from < regions[b].from; });
  for (std::size_t k = 1; k < order.size(); ++k) {
    const Region& a = regions[order[k - 1]];
    const Region& b = regions[order[k]];
    if (b.from <= a.to)
      throw InputError(source, fmt::format("{}/{}", pointer, order[k]),
                       fmt::format("region {}..{} overlaps region {}..{}", stages[static_cast<std::size_t>(b.from)],
                                   stages[static_cast<std::size_t>(b.to)], stages[static_cast<std::size_t>(a.from)],
                                   stages[static_cast<std::size_t>(a.to)]));
  }
  std::vector<Region> sorted;
  for (std::size_t i : order) sorted.push_back(std::move(regions[i]));
  return sorted;
}

// Regions made in code: sorted, within [lo, hi], not overlapping, nested at
// most kMaxRegionDepth levels (what parse_regions() ensures of a document).
void validate_regions(const std::vector<Region>& regions, const std::string& pointer, int lo, int hi, int depth) {
  if (!regions.empty() && depth > kMaxRegionDepth)
    throw InputError("plan", pointer, fmt::format("regions nested more than {} levels deep", kMaxRegionDepth));
  int next = lo;
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const Region& r = regions[i];
    const std::string at = fmt::format("{}/{}", pointer, i);
    if (r.from < next || r.from > r.to || r.to > hi)
      throw InputError("plan", at,
                       fmt::format("expected a region within stages {}..{} (after the previous one), got {}..{}", next,
                                   hi, r.from, r.to));
    validate_regions(r.inner, at + "/inner", r.from, r.to, depth + 1);
    next = r.to + 1;
  }
}

// An edge-block count: at most the stage's edges and kMaxEdgeBlocks.
std::int64_t block_count(const detail::FieldReader& blocks, const std::string& stage, std::int64_t edges) {
  const std::int64_t limit = std::min(edges, kMaxEdgeBlocks);
  const std::int64_t b = blocks.positive_int(stage, std::numeric_limits<std::int64_t>::max());
  if (b > limit)
    blocks.fail(stage, fmt::format("expected a positive integer of at most {} ({}), got {}", limit,
                                   limit == edges ? "the stage's edges" : "actmem's limit on edge blocks", b));
  return b;
}

std::string describe_regions(const std::vector<Region>& regions, const std::vector<std::string>& stages) {
  std::vector<std::string> parts;
  for (const Region& r : regions) {
    std::string text = stages[static_cast<std::size_t>(r.from)];
    if (r.to != r.from) text += ".." + stages[static_cast<std::size_t>(r.to)];
    if (!r.inner.empty()) text += " [" + describe_regions(r.inner, stages) + "]";
    parts.push_back(std::move(text));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

bool has_edge_update(const std::string& stage) {
  return stage == "encoder" || stage == "decoder" || stage.starts_with("processor.");
}

Plan empty_plan(const std::vector<std::string>& stages) {
  Plan p;
  p.edge_blocks.assign(stages.size(), 1);
  return p;
}

std::vector<std::string> builtin_plan_names() { return {"none", "full", "every:K", "deepmind", "deepmind:B"}; }

Plan builtin_plan(std::string_view name, const std::vector<std::string>& stages,
                  const std::vector<std::int64_t>& edges_per_stage) {
  const std::string source = "--plan";
  Plan p = empty_plan(stages);
  const int n = static_cast<int>(stages.size());
  if (name == "none") return p;
  if (name == "full") {
    for (int s = 0; s < n; ++s) p.checkpoints.push_back({s, s, {}});
    return p;
  }
  auto processor_groups = [&](std::int64_t k) {
    for (int s = processor_begin(stages); s < processor_end(stages); s += static_cast<int>(k))
      p.checkpoints.push_back({s, std::min(processor_end(stages) - 1, s + static_cast<int>(k) - 1), {}});
  };
  if (name.starts_with("every:")) {
    processor_groups(parse_suffix(name, "every:", kMaxProcessorSteps, source));
    return p;
  }
  if (name == "deepmind" || name.starts_with("deepmind:")) {
    const std::int64_t blocks = name == "deepmind" ? 8 : parse_suffix(name, "deepmind:", kMaxEdgeBlocks, source);
    p.checkpoints.push_back({0, 0, {}});
    processor_groups(3);
    p.checkpoints.push_back({n - 1, n - 1, {}});
    p.edge_blocks[0] = std::min(blocks, edges_per_stage[0]);
    p.edge_blocks[static_cast<std::size_t>(n - 1)] = std::min(blocks, edges_per_stage[static_cast<std::size_t>(n - 1)]);
    return p;
  }
  throw InputError(
      source, "",
      fmt::format("'{}' is not a plan file or a built-in plan (none, full, every:K, deepmind, deepmind:B){}", name,
                  did_you_mean(name, {"none", "full", "deepmind"})));
}

Plan plan_from_json(const nlohmann::json& document, const std::vector<std::string>& stages,
                    const std::vector<std::int64_t>& edges_per_stage, const std::string& source) {
  const detail::FieldReader in(document, source);
  Plan p = empty_plan(stages);
  p.checkpoints =
      parse_regions(in.value("checkpoints"), stages, source, "/checkpoints", 0, static_cast<int>(stages.size()) - 1, 1);
  if (in.has("step_checkpoint")) p.step_checkpoint = in.boolean("step_checkpoint");
  if (in.has("edge_blocks")) {
    const detail::FieldReader blocks(in.value("edge_blocks"), source, "/edge_blocks");
    for (const auto& [stage, value] : in.value("edge_blocks").items()) {
      const int s = stage_index(nlohmann::json(stage), stages, source, "/edge_blocks/" + stage);
      if (!has_edge_update(stage))
        blocks.fail(stage, "stage has no edge update to block (only encoder, processor.k and decoder do)");
      p.edge_blocks[static_cast<std::size_t>(s)] =
          block_count(blocks, stage, edges_per_stage[static_cast<std::size_t>(s)]);
    }
  }
  return p;
}

void validate(const Plan& plan, const std::vector<std::string>& stages,
              const std::vector<std::int64_t>& edges_per_stage) {
  const std::string source = "plan";
  if (plan.edge_blocks.size() != stages.size() || edges_per_stage.size() != stages.size())
    throw InputError(
        source, "/edge_blocks",
        fmt::format("expected one block count per stage ({}), got {}", stages.size(), plan.edge_blocks.size()));
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const std::int64_t limit = std::max<std::int64_t>(1, std::min(edges_per_stage[s], kMaxEdgeBlocks));
    if (plan.edge_blocks[s] < 1 || plan.edge_blocks[s] > limit)
      throw InputError(source, "/edge_blocks/" + stages[s],
                       fmt::format("expected a block count from 1 to {}, got {}", limit, plan.edge_blocks[s]));
  }
  validate_regions(plan.checkpoints, "/checkpoints", 0, static_cast<int>(stages.size()) - 1, 1);
}

nlohmann::json checkpoints_to_json(const std::vector<Region>& regions, const std::vector<std::string>& stages) {
  nlohmann::json list = nlohmann::json::array();
  for (const Region& r : regions) {
    nlohmann::json j{{"from", stages[static_cast<std::size_t>(r.from)]},
                     {"to", stages[static_cast<std::size_t>(r.to)]}};
    if (!r.inner.empty()) j["inner"] = checkpoints_to_json(r.inner, stages);
    list.push_back(std::move(j));
  }
  return list;
}

nlohmann::json plan_to_json(const Plan& plan, const std::vector<std::string>& stages) {
  nlohmann::json blocks = nlohmann::json::object();
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (plan.edge_blocks[s] > 1) blocks[stages[s]] = plan.edge_blocks[s];
  nlohmann::json out{{"checkpoints", checkpoints_to_json(plan.checkpoints, stages)},
                     {"edge_blocks", std::move(blocks)}};
  if (plan.step_checkpoint) out["step_checkpoint"] = true;
  return out;
}

std::string describe(const Plan& plan, const std::vector<std::string>& stages) {
  std::string text =
      plan.checkpoints.empty() ? "no checkpoints" : "checkpoints " + describe_regions(plan.checkpoints, stages);
  if (plan.step_checkpoint) text = "each rollout step checkpointed; inside it " + text;
  std::vector<std::string> blocked;
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (plan.edge_blocks[s] > 1) blocked.push_back(fmt::format("{}×{}", stages[s], plan.edge_blocks[s]));
  if (!blocked.empty()) text += fmt::format("; edge blocks {}", fmt::join(blocked, ", "));
  return text;
}

}  // namespace actmem

#include "actmem/simulate/plan.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "actmem/util/suggest.h"
#include "actmem/util/units.h"
#include "cost/memory_profile.h"
#include "util/json_fields.h"

namespace actmem {
namespace {

constexpr const char* kOffloadNeedsStepCheckpoint =
    "expected only with \"step_checkpoint\": true (what is offloaded is what each step's checkpoint keeps)";

// Which stages edge blocks may name, for an error message.
std::string with_edge_updates(std::span<const Stage> chain) {
  const std::string stages = describe_chain(chain, true);
  return stages.empty() ? "no stage of this model has one" : "only " + stages + " have one";
}

int stage_index(const nlohmann::json& value, std::span<const Stage> chain, const std::string& source,
                const std::string& pointer) {
  if (!value.is_string()) throw InputError(source, pointer, "expected a stage name, got " + detail::describe(value));
  const std::string name = value.get<std::string>();
  const auto it = std::find_if(chain.begin(), chain.end(), [&](const Stage& s) { return s.name == name; });
  if (it == chain.end())
    throw InputError(source, pointer,
                     fmt::format("unknown stage '{}'{}; stages are {}", name, did_you_mean(name, stage_names(chain)),
                                 describe_chain(chain, false)));
  return static_cast<int>(it - chain.begin());
}

// Parses a list of regions at nesting level `depth` (1: top level) that
// must lie within [lo, hi] and not overlap.
std::vector<Region> parse_regions(const nlohmann::json& list, std::span<const Stage> chain, const std::string& source,
                                  const std::string& pointer, int lo, int hi, int depth) {
  if (!list.is_array()) throw InputError(source, pointer, "expected a list of regions, got " + detail::describe(list));
  if (depth > kMaxRegionDepth && !list.empty())
    throw InputError(source, pointer, fmt::format("regions nested more than {} levels deep", kMaxRegionDepth));
  const std::vector<std::string> stages = stage_names(chain);
  std::vector<Region> regions;
  for (std::size_t i = 0; i < list.size(); ++i) {
    const std::string at = fmt::format("{}/{}", pointer, i);
    const detail::FieldReader in(list[i], source, at);
    in.reject_unknown_fields({"from", "to", "inner"});
    Region r;
    r.from = stage_index(in.value("from"), chain, source, at + "/from");
    r.to = stage_index(in.value("to"), chain, source, at + "/to");
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
      r.inner = parse_regions(in.value("inner"), chain, source, at + "/inner", r.from, r.to, depth + 1);
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

Plan empty_plan(const std::vector<std::string>& stages) {
  Plan p;
  p.edge_blocks.assign(stages.size(), 1);
  return p;
}

Plan plan_from_json(const nlohmann::json& document, std::span<const Stage> chain, const std::string& source) {
  const detail::FieldReader in(document, source);
  Plan p = empty_plan(stage_names(chain));
  p.checkpoints =
      parse_regions(in.value("checkpoints"), chain, source, "/checkpoints", 0, static_cast<int>(chain.size()) - 1, 1);
  if (in.has("step_checkpoint")) p.step_checkpoint = in.boolean("step_checkpoint");
  if (in.has("host_offload")) p.host_offload = in.boolean("host_offload");
  if (p.host_offload && !p.step_checkpoint) in.fail("host_offload", kOffloadNeedsStepCheckpoint);
  if (in.has("edge_blocks")) {
    const detail::FieldReader blocks(in.value("edge_blocks"), source, "/edge_blocks");
    for (const auto& [stage, value] : in.value("edge_blocks").items()) {
      const auto s =
          static_cast<std::size_t>(stage_index(nlohmann::json(stage), chain, source, "/edge_blocks/" + stage));
      if (chain[s].edge_rows == 0)
        blocks.fail(stage, "stage has no edge update to block (" + with_edge_updates(chain) + ")");
      p.edge_blocks[s] = block_count(blocks, stage, chain[s].edge_rows);
    }
  }
  return p;
}

void validate(const Plan& plan, std::span<const Stage> chain) {
  const std::string source = "plan";
  if (plan.edge_blocks.size() != chain.size())
    throw InputError(
        source, "/edge_blocks",
        fmt::format("expected one block count per stage ({}), got {}", chain.size(), plan.edge_blocks.size()));
  for (std::size_t s = 0; s < chain.size(); ++s) {
    const std::int64_t limit = std::max<std::int64_t>(1, std::min(chain[s].edge_rows, kMaxEdgeBlocks));
    if (plan.edge_blocks[s] < 1 || plan.edge_blocks[s] > limit)
      throw InputError(source, "/edge_blocks/" + chain[s].name,
                       fmt::format("expected a block count from 1 to {}, got {}", limit, plan.edge_blocks[s]));
  }
  validate_regions(plan.checkpoints, "/checkpoints", 0, static_cast<int>(chain.size()) - 1, 1);
  if (plan.host_offload && !plan.step_checkpoint)
    throw InputError(source, "/host_offload", kOffloadNeedsStepCheckpoint);
}

void validate_for_run(const Plan& plan, const CostGraph& graph, const std::string& source) {
  if (plan.host_offload && !scans_checkpointed_steps(graph))
    throw InputError(source, "/host_offload",
                     graph.run().framework == Framework::jax
                         ? "expected only where the rollout is XLA's scanned loop, which rule "
                           "xla.scan.step_checkpoints_scanned (switched off) makes it"
                         : "expected only where the rollout is XLA's scanned loop (--framework jax): host offload "
                           "is a JAX plan option");
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
  if (plan.host_offload) out["host_offload"] = true;
  return out;
}

std::string describe(const Plan& plan, const std::vector<std::string>& stages) {
  std::string text =
      plan.checkpoints.empty() ? "no checkpoints" : "checkpoints " + describe_regions(plan.checkpoints, stages);
  if (plan.step_checkpoint)
    text = (plan.host_offload ? "each rollout step checkpointed, its kept inputs and targets in host memory; inside it "
                              : "each rollout step checkpointed; inside it ") +
           text;
  std::vector<std::string> blocked;
  for (std::size_t s = 0; s < stages.size(); ++s)
    if (plan.edge_blocks[s] > 1) blocked.push_back(fmt::format("{}×{}", stages[s], plan.edge_blocks[s]));
  if (!blocked.empty()) text += fmt::format("; edge blocks {}", fmt::join(blocked, ", "));
  return text;
}

std::string describe_chain(std::span<const Stage> chain, bool edge_updates_only) {
  std::vector<std::string> parts;
  for (std::size_t s = 0; s < chain.size(); ++s) {
    if (edge_updates_only && chain[s].edge_rows == 0) continue;
    std::size_t last = s;
    while (last + 1 < chain.size() && chain[last + 1].role == chain[s].role &&
           (!edge_updates_only || chain[last + 1].edge_rows > 0))
      ++last;
    parts.push_back(last == s ? chain[s].name : chain[s].name + ".." + chain[last].name);
    s = last;
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace actmem

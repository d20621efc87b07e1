// The backward order (memory_machine.h): where XLA's schedulers run a
// backward op other than in reverse of the forward pass: complete branches
// first (J33, J36), and the last stage's edge embedding deferred until a
// recomputation sets it off (J32).

#include "simulate/memory_machine.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <stdexcept>
#include <utility>

namespace actmem::detail {

bool top_level_regions_run_ahead(const MemoryProfile& profile, const RunOptions& run, bool loop_body) {
  return profile.complete_branch_backward_first && !loop_body &&
         !profile.stacks_linearization_residuals(run, /*step_checkpoint=*/false);
}

bool nested_regions_hold_outputs(const MemoryProfile& profile) { return profile.nested_recompute_keeps_outputs; }

MemoryMachine::TopLevelBranch MemoryMachine::take_top_level_branch(const std::vector<Item>& items) {
  const int output_stage = static_cast<int>(g_.chain().size()) - 1;  // the stage that maps onto the output
  if (output_stage < 1) return {};
  const auto before_output_stage = [&](OpId id) { return g_.op(id).stage < output_stage; };
  const std::vector<EarlyRole> roles = early_roles(items, before_output_stage);
  TopLevelBranch branch;
  branch.in_branch.assign(items.size(), 0);
  branch.before = items.size();
  std::size_t plain = 0;  // the plain items, each of which saved once, in order
  bool any = false;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (items[i].kind != Item::Kind::op) continue;
    ++plain;
    branch.in_branch[i] = roles[i] == EarlyRole::early_branch && before_output_stage(items[i].op) ? 1 : 0;
    any = any || branch.in_branch[i];
  }
  if (!any) return {};
  for (std::size_t i = 0; i < items.size() && branch.before == items.size(); ++i)
    for (OpId id : ops_of(items[i]))
      if (!before_output_stage(id)) branch.before = i;
  if (plain > saved_.size()) throw std::logic_error("MemoryMachine: a plain op's saved tensors are missing");
  std::size_t j = saved_.size();
  for (std::size_t i = items.size(); i-- > 0;) {
    if (items[i].kind != Item::Kind::op) continue;
    --j;
    if (!branch.in_branch[i]) continue;
    branch.ops.emplace_back(items[i].op, std::move(saved_[j]));
    saved_.erase(saved_.begin() + static_cast<std::ptrdiff_t>(j));
  }
  return branch;
}

void MemoryMachine::run_top_level_branch(TopLevelBranch& branch) {
  for (auto& [op, saved] : branch.ops) backward_op(op, std::move(saved), 0, -1);
  branch.ops.clear();
  on_top_level_ahead_done();
}

void MemoryMachine::run_pending() {
  std::vector<Deferred> deferred = std::move(deferred_);
  deferred_.clear();
  for (Deferred& d : deferred) backward_op(d.op, std::move(d.saved), 0, -1);
}

// An op of the last stage (the one that maps onto the output: GraphCast's
// decoder, J32) outside its edge update that reads, of the activations,
// only what other such ops make: the edge embedding, whose input is a
// constant.
bool MemoryMachine::off_chain(OpId id) const {
  const Op& op = g_.op(id);
  if (op.edge_update || op.stage != static_cast<int>(g_.chain().size()) - 1) return false;
  for (TensorId t : op.inputs) {
    if (tensor(t).role != TensorRole::activation) continue;
    const OpId p = g_.producer(t);
    if (p < 0 || !off_chain(p)) return false;
  }
  return true;
}

// Those of them whose outputs only other such ops read: all but the one
// whose output the edge update reads (its LayerNorm, whose backward frees
// the gradient the edge update handed it and so runs at once).
bool MemoryMachine::deferrable(OpId id) const {
  if (!off_chain(id)) return false;
  for (TensorId t : g_.op(id).outputs)
    for (OpId c : g_.consumers(t))
      if (!off_chain(c)) return false;
  return true;
}

// What XLA writes for `op`: its materialised outputs and, after a first
// linear whose fusion writes SiLU's output too (J2), that output.
std::int64_t MemoryMachine::bytes_written(const Op& op, const OpMemoryRule& rule, std::int64_t block_rows) const {
  std::int64_t bytes = 0;
  for (TensorId t : op.outputs) {
    if (rule.output_materialized) bytes += output_bytes(op, rule, t, block_rows);
    for (OpId c : g_.consumers(t)) {
      const Op& consumer = g_.op(c);
      const OpMemoryRule& consumer_rule = profile_.rule(consumer.kind);
      if (consumer.kind == OpKind::silu && consumer_rule.output_materialized)
        bytes += output_bytes(consumer, consumer_rule, consumer.outputs.front(), block_rows);
    }
  }
  return bytes;
}

// Before an op of a region's recomputation: the deferred ops run if it
// writes more than the gradient into the embedding's hidden layer (XLA's
// list scheduler runs the ready op that frees the most bytes less those it
// makes, and theirs frees nothing while making that gradient, J32).
void MemoryMachine::deferred_set_off(const Op& op, const OpMemoryRule& rule, std::int64_t block_rows) {
  if (deferred_.empty() && !(pending_elsewhere_ && !ran_pending_elsewhere_)) return;
  const std::int64_t threshold = deferred_.empty() ? pending_elsewhere_->threshold : deferred_threshold_;
  if (bytes_written(op, rule, block_rows) <= threshold) return;
  if (!deferred_.empty()) {
    run_pending();
    return;
  }
  live_[kWorkspace] += pending_elsewhere_->peak;
  sample_transient();
  live_[kWorkspace] += pending_elsewhere_->delta - pending_elsewhere_->peak;
  ran_pending_elsewhere_ = true;
}

// A top-level region's recomputation (in the context begun for it) and
// backward (in `outer_context`, as every region's) in XLA's order (J33):
// for each stage with a complete branch, in chain order, its branch and
// the branch's ancestors recomputed, then the branch differentiated; then
// the rest recomputed and the rest differentiated, in reverse.
void MemoryMachine::recompute_and_backward(const Item& region, std::int64_t block_rows, int block, int outer_context) {
  const auto& children = region.children;
  std::vector<OpId> ops = ops_of(children);
  std::sort(ops.begin(), ops.end());
  const std::vector<EarlyRole> roles =
      early_roles(children, [&](OpId id) { return std::binary_search(ops.begin(), ops.end(), id); });
  std::vector<int> early_stages;
  for (std::size_t i = 0; i < children.size(); ++i)
    if (roles[i] == EarlyRole::early_branch) {
      const int stage = g_.op(children[i].op).stage;
      if (std::find(early_stages.begin(), early_stages.end(), stage) == early_stages.end())
        early_stages.push_back(stage);
    }
  const int region_context = context_;
  // This region's checkpoint entry: those of the regions right of it are gone.
  const auto kept_entry = static_cast<std::ptrdiff_t>(kept_inputs_.size()) - 1;
  LastReaders readers = last_readers(children, region.external_inputs);
  const auto run = [&](const std::vector<Item>& recomputed, const std::vector<Item>& differentiated) {
    context_ = region_context;
    ++recompute_depth_;
    recompute_items(recomputed, block_rows, block, readers, kept_entry);
    --recompute_depth_;
    context_ = outer_context;
    ++region_depth_;
    backward(differentiated, block_rows, block);
    --region_depth_;
  };
  if (early_stages.empty()) {
    run(children, children);
    return;
  }
  for (int stage : early_stages) {
    std::vector<Item> recomputed, differentiated;
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (roles[i] == EarlyRole::late || g_.op(children[i].op).stage != stage) continue;
      recomputed.push_back(children[i]);
      if (roles[i] == EarlyRole::early_branch) differentiated.push_back(children[i]);
    }
    run(recomputed, differentiated);
  }
  std::vector<Item> recomputed, differentiated;
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (roles[i] == EarlyRole::late) recomputed.push_back(children[i]);
    if (roles[i] != EarlyRole::early_branch) differentiated.push_back(children[i]);
  }
  run(recomputed, differentiated);
}

namespace {

// A region's plain children by op: the index of the child that is op, or -1.
class PlainChildren {
 public:
  explicit PlainChildren(const std::vector<Item>& children) {
    for (std::size_t i = 0; i < children.size(); ++i)
      if (children[i].kind == Item::Kind::op) plain_.emplace_back(children[i].op, i);
    std::sort(plain_.begin(), plain_.end());
  }
  std::ptrdiff_t operator()(OpId id) const {
    const auto it = std::lower_bound(plain_.begin(), plain_.end(), std::make_pair(id, std::size_t{0}));
    return it != plain_.end() && it->first == id ? static_cast<std::ptrdiff_t>(it->second) : -1;
  }

 private:
  std::vector<std::pair<OpId, std::size_t>> plain_;
};

// Marks `stage`'s branch's ancestors in `roles` (EarlyRole::early_ancestor): the
// producers of what its ops read or let go. False where one is not a plain
// op of the stage in the region, or another stage of the region reads
// what one makes.
bool mark_branch_ancestors(const CostGraph& g, const std::vector<Item>& children,
                           const std::function<bool(OpId)>& in_region, const PlainChildren& child_of, int stage,
                           std::vector<EarlyRole>& roles) {
  for (std::size_t i = children.size(); i-- > 0;) {
    if (roles[i] == EarlyRole::late || g.op(children[i].op).stage != stage) continue;
    const Op& op = g.op(children[i].op);
    std::vector<TensorId> reads = op.inputs;  // and the holds it lets go (made in its stage)
    reads.insert(reads.end(), op.releases_held.begin(), op.releases_held.end());
    for (TensorId t : reads) {
      const OpId p = g.producer(t);
      if (p < 0) continue;
      const std::ptrdiff_t k = in_region(p) ? child_of(p) : -1;
      if (k < 0 || g.op(p).stage != stage) return false;
      if (roles[static_cast<std::size_t>(k)] != EarlyRole::late) continue;
      roles[static_cast<std::size_t>(k)] = EarlyRole::early_ancestor;
      // What another stage of the region reads of it must wait for that
      // stage's backward: not a branch that runs first.
      for (TensorId u : g.op(p).outputs)
        for (OpId c : g.consumers(u))
          if (in_region(c) && g.op(c).stage != stage) return false;
    }
  }
  return true;
}

}  // namespace

// A stage's complete branch in a region: its plain ops whose outputs only
// ops after the region or other such ops of the stage read (their
// gradients are complete when the region's backward starts), provided
// that the activations the branch reads or lets go (Op::releases_held),
// and its ancestors do, are made by plain ops of the same stage in the
// region that no other stage of the region reads (recomputing and
// differentiating it then need nothing of another stage, and give it
// nothing).
std::vector<EarlyRole> MemoryMachine::early_roles(const std::vector<Item>& children,
                                                  const std::function<bool(OpId)>& in_region) const {
  std::vector<EarlyRole> roles(children.size(), EarlyRole::late);
  const PlainChildren child_of(children);
  // The branches, found from the last child back.
  for (std::size_t i = children.size(); i-- > 0;) {
    if (children[i].kind != Item::Kind::op) continue;
    bool read = false, complete = true;
    for (TensorId t : g_.op(children[i].op).outputs)
      for (OpId c : g_.consumers(t)) {
        read = true;
        if (!in_region(c)) continue;
        const std::ptrdiff_t k = child_of(c);
        complete = complete && k >= 0 && roles[static_cast<std::size_t>(k)] == EarlyRole::early_branch &&
                   g_.op(c).stage == g_.op(children[i].op).stage;
      }
    if (read && complete) roles[i] = EarlyRole::early_branch;
  }
  // Each stage's branch with its ancestors, or none of it.
  std::vector<int> stages;
  for (std::size_t i = 0; i < children.size(); ++i)
    if (roles[i] == EarlyRole::early_branch) stages.push_back(g_.op(children[i].op).stage);
  std::sort(stages.begin(), stages.end());
  stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  for (int stage : stages) {
    std::vector<EarlyRole> with = roles;
    const bool valid = mark_branch_ancestors(g_, children, in_region, child_of, stage, with);
    for (std::size_t i = 0; i < children.size(); ++i) {
      if (children[i].kind != Item::Kind::op || g_.op(children[i].op).stage != stage) continue;
      roles[i] = valid ? with[i] : EarlyRole::late;
    }
  }
  return roles;
}

}  // namespace actmem::detail

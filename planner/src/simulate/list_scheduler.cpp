#include "simulate/list_scheduler.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <tuple>

namespace actmem::detail {

int InstructionGraph::add_buffer(std::int64_t bytes, bool live_out) {
  buffers_.push_back({bytes, live_out, -1});
  return static_cast<int>(buffers_.size()) - 1;
}

int InstructionGraph::add_instruction(std::vector<int> defines, std::vector<int> reads, std::vector<int> after,
                                      std::vector<int> reads_via_alias) {
  const int id = static_cast<int>(instructions_.size());
  Instruction i;
  i.operands = std::move(after);
  for (int b : reads) {
    const int definer = buffers_[static_cast<std::size_t>(b)].definer;
    if (definer >= 0) i.operands.push_back(definer);
  }
  std::sort(i.operands.begin(), i.operands.end());
  i.operands.erase(std::unique(i.operands.begin(), i.operands.end()), i.operands.end());
  reads.insert(reads.end(), reads_via_alias.begin(), reads_via_alias.end());
  std::sort(reads.begin(), reads.end());
  reads.erase(std::unique(reads.begin(), reads.end()), reads.end());
  i.reads = std::move(reads);
  for (int b : defines) {
    Buffer& buffer = buffers_[static_cast<std::size_t>(b)];
    if (buffer.definer >= 0) throw std::logic_error("instruction graph: a buffer defined twice");
    buffer.definer = id;
  }
  i.defines = std::move(defines);
  instructions_.push_back(std::move(i));
  return id;
}

std::vector<int> InstructionGraph::unscheduled_uses() const {
  std::vector<int> uses(buffers_.size(), 0);
  for (const Instruction& i : instructions_)
    for (int b : i.reads) ++uses[static_cast<std::size_t>(b)];
  for (std::size_t b = 0; b < buffers_.size(); ++b)
    if (buffers_[b].live_out) ++uses[b];
  return uses;
}

std::vector<int> InstructionGraph::schedule() const {
  const std::size_t n = instructions_.size();
  std::vector<std::vector<int>> users(n);
  std::vector<int> waiting(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    for (int o : instructions_[i].operands) {
      users[static_cast<std::size_t>(o)].push_back(static_cast<int>(i));
      ++waiting[i];
    }
  std::vector<int> uses = unscheduled_uses();

  // Ready instructions by (freed − defined, users, −(when made ready)): the
  // largest is next.
  using Key = std::tuple<std::int64_t, std::size_t, std::int64_t, int>;
  std::set<Key> ready;
  std::vector<Key> key_of(n);
  std::vector<char> is_ready(n, 0);
  std::int64_t made_ready = 0;
  auto priority = [&](int i) {
    const Instruction& ins = instructions_[static_cast<std::size_t>(i)];
    std::int64_t net = 0;
    for (int b : ins.reads)
      if (uses[static_cast<std::size_t>(b)] == 1) net += bytes(b);
    for (int b : ins.defines) net -= bytes(b);
    return std::pair{net, users[static_cast<std::size_t>(i)].size()};
  };
  auto make_ready = [&](int i) {
    const auto [net, user_count] = priority(i);
    key_of[static_cast<std::size_t>(i)] = {net, user_count, -++made_ready, i};
    ready.insert(key_of[static_cast<std::size_t>(i)]);
    is_ready[static_cast<std::size_t>(i)] = 1;
  };
  for (std::size_t i = 0; i < n; ++i)
    if (waiting[i] == 0) make_ready(static_cast<int>(i));

  std::vector<int> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int best = std::get<3>(*ready.rbegin());
    ready.erase(std::prev(ready.end()));
    is_ready[static_cast<std::size_t>(best)] = 0;
    order.push_back(best);
    bool came_to_one = false;
    for (int b : instructions_[static_cast<std::size_t>(best)].reads)
      came_to_one |= --uses[static_cast<std::size_t>(b)] == 1;
    for (int u : users[static_cast<std::size_t>(best)])
      if (--waiting[static_cast<std::size_t>(u)] == 0) make_ready(u);
    if (!came_to_one) continue;
    for (int o : instructions_[static_cast<std::size_t>(best)].operands)
      for (int u : users[static_cast<std::size_t>(o)]) {
        if (!is_ready[static_cast<std::size_t>(u)]) continue;
        const Key& old = key_of[static_cast<std::size_t>(u)];
        if (priority(u) == std::pair{std::get<0>(old), std::get<1>(old)}) continue;
        ready.erase(old);
        make_ready(u);
      }
  }
  if (order.size() != n) throw std::logic_error("instruction graph: a cycle");
  return order;
}

std::vector<InstructionGraph::Lifetime> InstructionGraph::lifetimes(const std::vector<int>& order) const {
  std::vector<Lifetime> out(buffers_.size());
  const std::size_t last = order.empty() ? 0 : order.size() - 1;
  for (std::size_t b = 0; b < buffers_.size(); ++b)
    if (buffers_[b].live_out) out[b].end = last;
  for (std::size_t p = 0; p < order.size(); ++p) {
    const Instruction& i = instructions_[static_cast<std::size_t>(order[p])];
    for (int b : i.defines) out[static_cast<std::size_t>(b)].begin = p;
    for (int b : i.reads) out[static_cast<std::size_t>(b)].end = std::max(out[static_cast<std::size_t>(b)].end, p);
  }
  for (std::size_t b = 0; b < buffers_.size(); ++b)  // a buffer nothing reads lives while it is made
    out[b].end = std::max(out[b].end, out[b].begin);
  return out;
}

std::vector<std::int64_t> InstructionGraph::usage(const std::vector<int>& order,
                                                  const std::vector<char>& counted) const {
  std::vector<std::int64_t> change(order.size() + 1, 0);
  const std::vector<Lifetime> life = lifetimes(order);
  for (std::size_t b = 0; b < buffers_.size(); ++b) {
    if (!counted.empty() && !counted[b]) continue;
    change[life[b].begin] += buffers_[b].bytes;
    change[life[b].end + 1] -= buffers_[b].bytes;
  }
  std::vector<std::int64_t> out(order.size());
  std::int64_t live = 0;
  for (std::size_t p = 0; p < order.size(); ++p) out[p] = live += change[p];
  return out;
}

}  // namespace actmem::detail

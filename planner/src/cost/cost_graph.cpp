#include "actmem/cost/cost_graph.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/topological_sort.hpp>

#include "actmem/util/error.h"
#include "actmem/util/limits.h"
#include "cost/cut_points.h"
#include "util/checked_math.h"

namespace actmem {

// Ops as vertices, one edge per (tensor, consumer) from the tensor's producer.
struct CostGraph::Dag {
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property,
                                      boost::property<boost::edge_name_t, TensorId>>;
  Graph graph;
};

namespace {

// Every kind's name: the switch names every enumerator (-Wswitch), and a
// value past kOpKindCount has none, so kOpKindCount counts them all.
constexpr std::string_view kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::linear: return "linear";
    case OpKind::silu: return "silu";
    case OpKind::layer_norm: return "layer_norm";
    case OpKind::gather: return "gather";
    case OpKind::concat: return "concat";
    case OpKind::zeros: return "zeros";
    case OpKind::scatter_add: return "scatter_add";
    case OpKind::add: return "add";
    case OpKind::mse_loss: return "mse_loss";
    case OpKind::next_input: return "next_input";
    case OpKind::cast: return "cast";
    case OpKind::matmul: return "matmul";
    case OpKind::softmax: return "softmax";
  }
  return {};
}
static_assert(!kind_name(static_cast<OpKind>(kOpKindCount - 1)).empty() &&
                  kind_name(static_cast<OpKind>(kOpKindCount)).empty(),
              "kOpKindCount must be the last OpKind plus one");

}  // namespace

std::string to_string(OpKind kind) {
  const std::string_view name = kind_name(kind);
  return name.empty() ? "?" : std::string(name);
}

CostGraph::CostGraph() : dag_(std::make_unique<Dag>()) {}
CostGraph::CostGraph(CostGraph&&) noexcept = default;
CostGraph& CostGraph::operator=(CostGraph&&) noexcept = default;
CostGraph::~CostGraph() = default;

std::vector<std::string> stage_names(std::span<const Stage> chain) {
  std::vector<std::string> names;
  for (const Stage& s : chain) names.push_back(s.name);
  return names;
}

std::vector<std::int64_t> edges_per_stage(std::span<const Stage> chain) {
  std::vector<std::int64_t> edges;
  for (const Stage& s : chain) edges.push_back(s.edge_rows);
  return edges;
}

std::string CostGraph::stage_name(int stage) const {
  return stage >= 0 && static_cast<std::size_t>(stage) < stages_.size() ? stages_[static_cast<std::size_t>(stage)]
                                                                        : std::string{"loss"};
}

OpId CostGraph::producer(TensorId id) const { return producer_[static_cast<std::size_t>(id)]; }

std::span<const OpId> CostGraph::consumers(TensorId id) const { return consumers_[static_cast<std::size_t>(id)]; }

std::int64_t CostGraph::parameter_count() const {
  std::int64_t n = 0;
  for (const Tensor& t : tensors_)
    if (t.role == TensorRole::parameter) n += t.rows * t.cols;
  return n;
}

std::int64_t CostGraph::parameter_bytes() const { return parameter_count() * 4; }

bool CostGraph::rows_tagged(std::int64_t rows, RowTag tag) const {
  return std::find(row_tags_.begin(), row_tags_.end(), std::pair{tag, rows}) != row_tags_.end();
}

std::int64_t CostGraph::input_bytes() const {
  std::int64_t n = 0;
  for (const Tensor& t : tensors_)
    if (t.role == TensorRole::input) n += t.bytes();
  return n;
}

CostGraphBuilder::CostGraphBuilder(const ModelDescription& model, const RunOptions& run, std::vector<Stage> chain) {
  graph_.model_ = model;
  graph_.run_ = run;
  graph_.stages_ = stage_names(chain);
  graph_.chain_ = std::move(chain);
}

namespace {

// A step too large to plan, blamed on the run option a user would lower
// (the batch when bytes are the problem, else the rollout), or the model.
InputError too_large(const CostGraph& g, bool bytes, std::string message) {
  if (bytes && g.run().batch > 1) return InputError::argument("batch", std::move(message));
  if (g.run().rollout > 1) return InputError::argument("rollout", std::move(message));
  return InputError(g.model().name, "", std::move(message));
}

}  // namespace

void CostGraphBuilder::check_bytes(const Tensor& t) {
  using detail::checked_add;
  using detail::checked_mul;
  const std::optional<std::int64_t> elements = checked_mul(t.rows, t.cols);
  const std::optional<std::int64_t> bytes = elements ? checked_mul(*elements, t.element_bytes) : std::nullopt;
  const std::optional<std::int64_t> total = bytes ? checked_add(total_bytes_, *bytes) : std::nullopt;
  if (t.rows < 0 || t.cols < 0 || !total || *total > kMaxStepBytes) {
    const RunOptions& r = graph_.run();
    throw too_large(graph_, true,
                    fmt::format("the training step is too large to plan: the tensors of model '{}' at batch {}, "
                                "rollout {}, {} exceed 2^56 bytes (64 PiB); reduce the batch or the rollout",
                                graph_.model().name, r.batch, r.rollout, to_string(r.dtype)));
  }
  total_bytes_ = *total;
}

TensorId CostGraphBuilder::add_tensor(Tensor tensor) {
  check_bytes(tensor);
  graph_.tensors_.push_back(std::move(tensor));
  graph_.producer_.push_back(-1);
  graph_.consumers_.emplace_back();
  return static_cast<TensorId>(graph_.tensors_.size() - 1);
}

OpId CostGraphBuilder::add_op(Op op) {
  if (static_cast<std::int64_t>(graph_.ops_.size()) >= kMaxStepOps)
    throw too_large(graph_, false,
                    fmt::format("the training step is too large to plan: model '{}' at rollout {} has more than {} "
                                "ops (the limit that keeps every answer within seconds); reduce the rollout",
                                graph_.model().name, graph_.run().rollout, kMaxStepOps));
  const auto id = static_cast<OpId>(graph_.ops_.size());
  for (TensorId t : op.inputs) graph_.consumers_[static_cast<std::size_t>(t)].push_back(id);
  for (TensorId t : op.outputs) {
    if (graph_.producer_[static_cast<std::size_t>(t)] != -1)
      throw std::logic_error("tensor " + graph_.tensors_[static_cast<std::size_t>(t)].name + " produced twice");
    graph_.producer_[static_cast<std::size_t>(t)] = id;
  }
  graph_.ops_.push_back(std::move(op));
  return id;
}

// Op::releases_held's contract.
void CostGraphBuilder::check_holds() const {
  const CostGraph& g = graph_;
  for (std::size_t i = 0; i < g.ops_.size(); ++i) {
    const Op& op = g.ops_[i];
    for (TensorId t : op.releases_held) {
      const OpId p = g.producer_[static_cast<std::size_t>(t)];
      const Op* made = p >= 0 && static_cast<std::size_t>(p) < i ? &g.ops_[static_cast<std::size_t>(p)] : nullptr;
      const bool inside_edge_update =
          op.edge_update || (made && made->edge_update && g.ops_[static_cast<std::size_t>(p) + 1].edge_update);
      if (!made || made->step != op.step || made->stage != op.stage || inside_edge_update)
        throw std::logic_error(
            fmt::format("cost graph: op {} holds {}, not made earlier in its stage outside an edge "
                        "update",
                        op.name, g.tensors_[static_cast<std::size_t>(t)].name));
    }
  }
}

void CostGraphBuilder::build_dag() {
  CostGraph& g = graph_;
  auto& dag = g.dag_->graph;
  dag = CostGraph::Dag::Graph(g.ops_.size());
  for (std::size_t t = 0; t < g.tensors_.size(); ++t) {
    const OpId from = g.producer_[t];
    if (from < 0) continue;
    for (OpId to : g.consumers_[t])
      boost::add_edge(static_cast<std::size_t>(from), static_cast<std::size_t>(to), static_cast<TensorId>(t), dag);
  }
}

// Acyclic, ops() a topological order of the DAG, stages in chain order.
void CostGraphBuilder::check_order() const {
  const CostGraph& g = graph_;
  const auto& dag = g.dag_->graph;
  // topological_sort throws boost::not_a_dag on a cycle; it writes vertices
  // in reverse topological order (any one: ops() is checked below).
  std::vector<std::size_t> reverse_order;
  boost::topological_sort(dag, std::back_inserter(reverse_order));
  // The emitted order must itself be topological: every edge runs forward.
  for (auto [e, end] = boost::edges(dag); e != end; ++e) {
    if (boost::source(*e, dag) >= boost::target(*e, dag))
      throw std::logic_error(
          fmt::format("cost graph: op {} consumes a tensor produced later", g.ops_[boost::target(*e, dag)].name));
  }
  // Stages contiguous and in chain order within each rollout step.
  for (std::size_t i = 1; i < g.ops_.size(); ++i) {
    const Op& a = g.ops_[i - 1];
    const Op& b = g.ops_[i];
    if (b.step < a.step || (b.step == a.step && b.stage < a.stage))
      throw std::logic_error("cost graph: stages out of order at op " + b.name);
  }
}

// TensorLifetime from the DAG: each op's out-edges name the tensors it makes
// that are read, and their readers (positions in ops(): check_order()).
void CostGraphBuilder::compute_lifetimes() {
  CostGraph& g = graph_;
  const auto& dag = g.dag_->graph;
  g.lifetimes_.assign(g.tensors_.size(), TensorLifetime{});
  for (std::size_t op = 0; op < g.ops_.size(); ++op)
    for (TensorId t : g.ops_[op].outputs) g.lifetimes_[static_cast<std::size_t>(t)].producer = static_cast<OpId>(op);
  const auto names = boost::get(boost::edge_name, dag);
  for (std::size_t op = 0; op < g.ops_.size(); ++op)
    for (auto [e, end] = boost::out_edges(op, dag); e != end; ++e) {
      TensorLifetime& life = g.lifetimes_[static_cast<std::size_t>(names[*e])];
      life.last_use = std::max(life.last_use, static_cast<OpId>(boost::target(*e, dag)));
      ++life.uses;
    }
}

// XLA:TPU at its default precision multiplies float32 matrices in
// bfloat16: a gather's, a LayerNorm's or a residual add's output that only
// matmuls read (directly or as a part of an MLP input's concatenation) is
// made and kept in bfloat16, while its gradient stays float32
// (docs/journal.md J13, J23).
// In the backward pass the gradient of a linear's output, which only the
// linear's own weight- and input-gradient matmuls read, is made in
// bfloat16 by the LayerNorm's or SiLU's backward that writes it; SiLU's
// output gradient is the same buffer (J21).
void CostGraphBuilder::round_matmul_operands() {
  const auto read_by_matmuls_only = [this](TensorId t, const auto& self) -> bool {
    const auto readers = graph_.consumers(t);
    return !readers.empty() && std::all_of(readers.begin(), readers.end(), [&](OpId r) {
      const Op& op = graph_.op(r);
      return (op.kind == OpKind::linear && op.inputs.front() == t) ||
             (op.kind == OpKind::concat && self(op.outputs.front(), self));
    });
  };
  for (const Op& op : graph_.ops_) {
    if (op.kind != OpKind::gather && op.kind != OpKind::layer_norm && op.kind != OpKind::add) continue;
    if (!read_by_matmuls_only(op.outputs.front(), read_by_matmuls_only)) continue;
    Tensor& t = graph_.tensors_[static_cast<std::size_t>(op.outputs.front())];
    if (t.gradient_element_bytes == 0) t.gradient_element_bytes = t.element_bytes;
    total_bytes_ -= t.bytes();
    t.element_bytes = element_bytes(DType::bfloat16);
    total_bytes_ += t.bytes();
  }
  const auto narrow_gradient = [this](TensorId id) {
    Tensor& t = graph_.tensors_[static_cast<std::size_t>(id)];
    if (t.gradient_element_bytes == 0) t.gradient_element_bytes = element_bytes(DType::bfloat16);
  };
  for (const Op& op : graph_.ops_) {
    if (op.kind != OpKind::layer_norm && op.kind != OpKind::silu) continue;
    const OpId producer = graph_.producer(op.inputs.front());
    if (producer < 0 || graph_.op(producer).kind != OpKind::linear) continue;
    narrow_gradient(op.inputs.front());
    if (op.kind == OpKind::silu) narrow_gradient(op.outputs.front());
  }
}

CostGraph CostGraphBuilder::finish() {
  if (graph_.run().framework == Framework::jax && graph_.run().dtype == DType::float32) round_matmul_operands();
  check_holds();
  build_dag();
  check_order();
  compute_lifetimes();
  detail::check_stage_boundaries(graph_);
  return std::move(graph_);
}

}  // namespace actmem

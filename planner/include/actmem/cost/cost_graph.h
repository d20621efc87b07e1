#pragma once
// The op-level cost graph of one training step's forward pass.
//
// Vertices are operations, edges are the tensors flowing between them
// (stored as a Boost.Graph DAG behind this header). Every op knows its stage
// (docs/cost-model.md §1), its rollout step, its inputs and outputs and its
// forward and backward FLOPs. What an op keeps for the backward pass depends
// on the framework and lives in memory_profile.h, not here.
//
// Contract of ops(): a topological order in which each (step, stage) is one
// contiguous run, stages in chain order, and each stage's edge update (the
// ops with edge_update set: gathers, concat, edge MLP, LayerNorm) is one
// contiguous run inside it. The simulator relies on this.
//
// What Boost.Graph computes (CostGraphBuilder::finish()): that the DAG is
// acyclic (topological_sort) and that ops() is a topological order of it;
// each tensor's lifetime in that order, read off the DAG's edges
// (lifetime(); the simulator's engine and the solver's replay read it); and
// the checkpointable cut points of that order, which every stage boundary
// must be but for the two kinds src/cost/cut_points.cpp accepts (a branch off the
// inputs, a join of all that crosses into it).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "actmem/model/model.h"
#include "actmem/model/run_options.h"

namespace actmem {

using TensorId = std::int32_t;
using OpId = std::int32_t;

enum class TensorRole {
  input,      // model inputs: features, edge features, index arrays, targets
  parameter,  // trainable, float32 master copies
  activation  // everything an op produces
};

struct Tensor {
  std::string name;
  std::int64_t rows = 0;  // leading dimension: nodes or edges (times batch), 1 for scalars
  std::int64_t cols = 0;  // trailing dimension(s) flattened
  int element_bytes = 0;
  TensorRole role = TensorRole::activation;
  bool requires_grad = false;
  // Bytes per element of its gradient when they differ (0: element_bytes):
  // JAX's carried frames are kept in the activation dtype while their
  // cotangent stays float32 (docs/journal.md J9).
  int gradient_element_bytes = 0;
  // Its bytes where the compiler's layout pads it (0: rows × cols ×
  // element_bytes), its gradient's alike: XLA:TPU's tiles of a scanned
  // rollout's carried frames (docs/journal.md J39).
  std::int64_t padded_bytes = 0;
  // Its rows already count the padded planes of XLA:TPU's per-variable
  // layout ([lat, lon] planes in (8, 128) tiles: DeepMind's targets on a
  // latitude–longitude grid, J26), not node-major rows; set by the builder.
  bool tiled_planes = false;
  std::int64_t bytes() const { return padded_bytes > 0 ? padded_bytes : rows * cols * element_bytes; }
  std::int64_t gradient_bytes() const {
    const int gradient = gradient_element_bytes > 0 ? gradient_element_bytes : element_bytes;
    return padded_bytes > 0 ? padded_bytes / element_bytes * gradient : rows * cols * gradient;
  }
};

// XLA:TPU lays an array's two minor dimensions out in tiles of 8 × 128
// elements: the bytes of one whose minor dimension has `minor` elements and
// the next `second_minor`, `major` the product of the others (J26, J39).
inline constexpr std::int64_t kTpuTileRows = 8;
inline constexpr std::int64_t kTpuTileColumns = 128;
constexpr std::int64_t tpu_tiled_bytes(std::int64_t minor, std::int64_t second_minor, std::int64_t major,
                                       int element_bytes) {
  auto round_up = [](std::int64_t n, std::int64_t tile) { return (n + tile - 1) / tile * tile; };
  return major * round_up(second_minor, kTpuTileRows) * round_up(minor, kTpuTileColumns) * element_bytes;
}

enum class OpKind {
  linear,       // inputs {x, weight, bias}: x·Wᵀ + b
  silu,         // inputs {x}
  layer_norm,   // inputs {x, scale, offset}; outputs {y, stats (mean, rstd; float32)}
  gather,       // inputs {source, index}: source.index_select(0, index)
  concat,       // inputs {a, b, …} along the feature axis
  zeros,        // no inputs: the accumulator of a scatter
  scatter_add,  // inputs {accumulator, index, source}: accumulator.index_add(0, index, source)
  add,          // inputs {a, b}: residual
  mse_loss,     // inputs {prediction, target}; output a scalar
  next_input,   // inputs {prediction, static features}: the next rollout step's grid input
  cast,         // inputs {x}: x in another dtype (PyTorch autocast's casts to and from bfloat16)
  matmul,       // inputs {a, b}, two activations: their product (attention's scores, q·kᵀ, and its mix, p·v)
  softmax       // inputs {x}: softmax along each row (attention's weights)
};
// How many kinds there are: the last one's value plus one (cost_graph.cpp
// checks at compile time that no kind lies beyond it).
inline constexpr int kOpKindCount = static_cast<int>(OpKind::softmax) + 1;

std::string to_string(OpKind kind);

// Row counts an architecture's builder marks for the memory rules, which
// recognise a tensor by the set its rows run over, never by the model's
// counts (docs/architecture.md, "The architecture seam").
enum class RowTag {
  // Nodes XLA:TPU lays out batch-major and, at batch > 1, copies before a
  // gather reads them (J15): GraphCast's grid nodes × batch.
  batch_major_nodes,
  // Edges whose LayerNorms XLA:TPU copies into another layout, at batch 1,
  // where their count is a multiple of 8 (J31): GraphCast's mesh edges.
  layout_copied_edges,
};

// What a stage does in the network. Built-in plans and the trainers'
// exports place checkpoints by role; nothing outside an architecture's
// builder matches stage names.
enum class StageRole {
  encoder,    // grid to mesh (GraphCast: the grid2mesh GNN)
  embedding,  // between encoder and processor, no edge update (GraphCast's mesh edge embedding)
  processor,  // one message-passing step on the mesh
  decoder     // mesh to grid
};

// One stage of the chain, as its architecture's builder declares it.
struct Stage {
  std::string name;
  StageRole role = StageRole::processor;
  // Rows (per sample) of the stage's edge update, the rows edge blocks
  // divide; 0: the stage has no edge update and is never blocked.
  std::int64_t edge_rows = 0;
};

// Stage::edge_rows of each stage, in chain order: edge-block counts lie
// within 1..max(1, this).
std::vector<std::int64_t> edges_per_stage(std::span<const Stage> chain);
// Stage::name of each stage, in chain order.
std::vector<std::string> stage_names(std::span<const Stage> chain);

// The part an op plays in a pattern of ops the architecture's builder
// marks for the memory rules that recognise it (docs/architecture.md, "The
// architecture seam"): an edge update's MLP as XLA orders its blocked
// backward (J17): gathers of the senders' and receivers' features, their
// concatenation with the edges' latent, linear, activation, linear,
// LayerNorm.
enum class OpPart : char {
  none,
  edge_sender_gather,
  edge_receiver_gather,
  edge_input_concat,
  edge_first_linear,
  edge_activation,
  edge_second_linear,
  edge_norm
};

struct Op {
  OpKind kind = OpKind::linear;
  std::string name;
  int stage = 0;  // index into CostGraph::stages(); stages().size() means the loss
  int step = 0;   // rollout step
  std::vector<TensorId> inputs;
  std::vector<TensorId> outputs;
  double forward_flops = 0;
  double backward_flops = 0;
  bool edge_update = false;
  OpPart part = OpPart::none;
  // Tensors a name in the trainer's code holds past their last use, until
  // this op has run (a Python local that lives to its function's return;
  // docs/cost-model.md §2). Each is one more forward use, let go when this
  // op's forward is done, in whichever execution (the forward pass or a
  // recomputation) made the tensor. Not an input: nothing is saved, no
  // gradient flows, no checkpoint keeps it. Contract (CostGraphBuilder
  // checks it): each is made earlier in the same step and stage, and
  // neither this op nor the tensor's producer is inside an edge update
  // other than as its output, so that one stage's replay (the solver's) sees
  // the whole hold and edge blocks never split it.
  std::vector<TensorId> releases_held;
};

// A tensor's lifetime in the order of ops(), where an op's position is its
// OpId, read off the DAG's edges (one edge per (consumer, input slot), from
// the tensor's producer). An activation with uses > 0 has producer <
// last_use; inputs and parameters have producer -1 and no edges, so
// last_use -1 and uses 0. Holds (Op::releases_held) are not edges: they
// neither count as uses nor extend last_use.
struct TensorLifetime {
  OpId producer = -1;  // the op making it; -1: an input or a parameter
  OpId last_use = -1;  // the last op reading it; -1: none reads it
  int uses = 0;        // its edges: an op reading it twice counts twice
};

class CostGraph {
 public:
  // The training step of the model's architecture, by its builder
  // (models/architectures.cpp picks it; GraphCast's is
  // models/graphcast_builder.cpp); an architecture without one, a run
  // validate() refuses or a name in run.rules_off that is no rule's
  // (memory_rules.h) is an InputError.
  static CostGraph build(const ModelDescription& model, const RunOptions& run);

  CostGraph(CostGraph&&) noexcept;
  CostGraph& operator=(CostGraph&&) noexcept;
  ~CostGraph();

  const ModelDescription& model() const { return model_; }
  const RunOptions& run() const { return run_; }

  // The stage chain (one step of the network; every rollout step repeats
  // it) with what its builder declares of each stage, and the names alone.
  // "loss" is not among them.
  std::span<const Stage> chain() const { return chain_; }
  const std::vector<std::string>& stages() const { return stages_; }
  std::string stage_name(int stage) const;

  std::span<const Op> ops() const { return ops_; }
  std::span<const Tensor> tensors() const { return tensors_; }
  const Tensor& tensor(TensorId id) const { return tensors_[static_cast<std::size_t>(id)]; }
  const Op& op(OpId id) const { return ops_[static_cast<std::size_t>(id)]; }

  // The op producing a tensor (-1 for inputs and parameters) and the ops
  // consuming it, read off the DAG.
  OpId producer(TensorId id) const;
  std::span<const OpId> consumers(TensorId id) const;
  // Lifetimes by tensor (TensorLifetime), computed once from the DAG.
  const TensorLifetime& lifetime(TensorId id) const { return lifetimes_[static_cast<std::size_t>(id)]; }
  std::span<const TensorLifetime> lifetimes() const { return lifetimes_; }

  std::int64_t parameter_bytes() const;  // float32 masters
  std::int64_t parameter_count() const;
  std::int64_t input_bytes() const;

  // Whether the builder marked this row count with the tag (RowTag).
  bool rows_tagged(std::int64_t rows, RowTag tag) const;

 private:
  friend class CostGraphBuilder;
  CostGraph();

  ModelDescription model_;
  RunOptions run_;
  std::vector<Stage> chain_;
  std::vector<std::string> stages_;
  std::vector<Op> ops_;
  std::vector<Tensor> tensors_;
  std::vector<OpId> producer_;
  std::vector<std::vector<OpId>> consumers_;
  std::vector<TensorLifetime> lifetimes_;
  std::vector<std::pair<RowTag, std::int64_t>> row_tags_;
  struct Dag;
  std::unique_ptr<Dag> dag_;
};

// Assembles a CostGraph op by op (used by the model builders), then checks it
// with Boost.Graph: acyclic, emitted in topological order, stages contiguous,
// every stage boundary a cut point of the order or of a kind
// src/cost/cut_points.cpp accepts, and computes the lifetimes from the DAG.
// For JAX at float32 finish() first stores the outputs that XLA:TPU keeps
// in bfloat16 as matmul operands in 2 bytes a value, their gradients in 4
// (docs/journal.md J13), whatever the architecture.
// A step beyond actmem/util/limits.h is refused as it grows, before it takes the
// memory: tensors totalling more than kMaxStepBytes, or more than
// kMaxStepOps ops, are an InputError naming the batch or the rollout (or the
// model). Below kMaxStepBytes no byte figure of the simulator or the
// solver can overflow int64.
class CostGraphBuilder {
 public:
  CostGraphBuilder(const ModelDescription& model, const RunOptions& run, std::vector<Stage> chain);

  TensorId add_tensor(Tensor tensor);
  OpId add_op(Op op);
  // One more hold (Op::releases_held) let go after op `at`.
  void hold_until(OpId at, TensorId tensor) {
    graph_.ops_[static_cast<std::size_t>(at)].releases_held.push_back(tensor);
  }
  const Tensor& tensor(TensorId id) const { return graph_.tensor(id); }
  // Marks a row count for the memory rules (RowTag).
  void tag_rows(RowTag tag, std::int64_t rows) { graph_.row_tags_.emplace_back(tag, rows); }
  std::string stage_name(int stage) const { return graph_.stage_name(stage); }
  // The parameters added so far (CostGraph::parameter_count() of the graph
  // being built): a builder that has declared its parameters counts them
  // here without emitting its ops.
  std::int64_t parameter_count() const { return graph_.parameter_count(); }

  CostGraph finish();

 private:
  void check_bytes(const Tensor& tensor);
  void round_matmul_operands();
  void check_holds() const;
  void build_dag();
  void check_order() const;
  void compute_lifetimes();

  CostGraph graph_;
  std::int64_t total_bytes_ = 0;
};

// An architecture (docs/architecture.md, "The architecture seam"): the name a
// model's `architecture` gives, the fields its descriptions add to the
// shared ones, its builder (a CostGraphBuilder emitting its op DAG and stage
// chain) and its parameter count (what the builder declares, counted without
// building the step: equal to CostGraph::parameter_count() of every graph it
// builds for the model). GraphCast is built in (models/architectures.cpp).
struct Architecture {
  std::string name;
  std::vector<ArchitectureField> fields;
  CostGraph (*build)(const ModelDescription& model, const RunOptions& run) = nullptr;
  std::int64_t (*parameter_count)(const ModelDescription& model) = nullptr;
};

// Adds an architecture for CostGraph::build(), parameter_count() and the
// model readers, from then on and for every thread. A name already taken,
// an empty name, a missing function, or a field named like a shared one or
// twice is an InputError::argument("architecture", …). Safe to call while
// other threads build graphs.
void register_architecture(Architecture architecture);

}  // namespace actmem

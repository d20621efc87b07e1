#pragma once
// Stages that replay alike (docs/solver.md "Speed"). Stage s of a rollout
// step is a translate of an earlier stage `base` when both run the same ops
// on tensors of the same shapes and roles, and every producer and consumer
// of those tensors sits `offset` = s - base stages further along the chain
// (GraphCast's middle processor steps). A replay of s in a checkpoint
// context (solver_replay.h) then measures exactly what the replay of base
// measures in that context moved back by `offset`, its tensors renamed.

#include <cstdint>
#include <utility>
#include <vector>

#include "solve/solver_replay.h"

namespace actmem::detail {

struct StageTranslate {
  int base = -1;  // -1: none (the stage replays as itself)
  int offset = 0;
  // (tensor of the stage, corresponding tensor of base), sorted by the first.
  std::vector<std::pair<TensorId, TensorId>> to_base;
  TensorId base_of(TensorId t) const;
  TensorId of_base(TensorId t) const;
};

// Per stage of rollout step `step` (the loss excluded): its translate of
// the earliest stage it is one of. `edges`: edge-update rows per stage.
std::vector<StageTranslate> stage_translates(const ReplayGraph& rg, int step, const std::vector<std::int64_t>& edges);

}  // namespace actmem::detail

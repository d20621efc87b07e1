#pragma once
// What actmem accepts, so that every accepted input is answered in bounded
// time and memory and every byte figure fits in 64-bit arithmetic
// (docs/reliability.md states each limit with the measured cost of the
// largest accepted input). Inputs beyond a limit are InputErrors naming
// the option or field.

#include <cstdint>

namespace actmem {

// ---- run options (run_options.h) ----
inline constexpr std::int64_t kMaxBatch = 65536;
inline constexpr std::int64_t kMaxRollout = 1024;

// ---- devices (device.h) ----
inline constexpr std::int64_t kMaxDeviceBytes = std::int64_t{1} << 52;  // 4 PiB
// FLOP/s and bytes/s: anything a device could do, nothing that turns a
// step time into infinity or NaN.
inline constexpr double kMinDeviceRate = 1e6;
inline constexpr double kMaxDeviceRate = 1e21;

// ---- model descriptions (model.h) ----
inline constexpr std::int64_t kMaxCount = std::int64_t{1} << 40;  // nodes or edges of one set
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 20;  // features or latent
inline constexpr std::int64_t kMaxHiddenLayers = 64;
// The solver's work grows steeply with the stage chain (docs/solver.md,
// "Speed"); beyond this, fit takes longer than seconds.
inline constexpr std::int64_t kMaxProcessorSteps = 16;

// ---- one training step (cost_graph.h) ----
// Bytes of all tensors of the step (every rollout step, every sample). The
// simulator and the solver hold a bounded number of buffers per tensor at
// once (each recomputation level, a gradient, its contributions and
// sums), far fewer than 64, so every figure they compute stays below
// 2^62 and cannot overflow int64.
inline constexpr std::int64_t kMaxStepBytes = std::int64_t{1} << 56;  // 64 PiB
// Ops of the cost graph (rollout × ops per step); bounds the time and
// memory of building, simulating and solving.
inline constexpr std::int64_t kMaxStepOps = std::int64_t{1} << 17;

// ---- runs (run_options.h) ----
// Memory rules one run switches off: more than there are rules is a mistake.
inline constexpr std::int64_t kMaxRulesOff = 256;

// ---- plans (plan.h) ----
// Edge blocks of one stage: the solver's largest choice.
inline constexpr std::int64_t kMaxEdgeBlocks = 1024;
// K of the built-in plan every:K: a group is at most every repeated stage.
inline constexpr std::int64_t kMaxStagesPerGroup = kMaxProcessorSteps;
// Levels of checkpoint regions: top-level regions are depth 1.
inline constexpr int kMaxRegionDepth = 16;

// ---- reports (report.h) ----
inline constexpr std::int64_t kMaxTimelineRows = std::int64_t{1} << 17;

// ---- the command line ----
// Rows of one `actmem sweep` (devices × batch sizes × rollouts); each row
// costs one fit.
inline constexpr std::int64_t kMaxSweepRows = 256;

// ---- input files and documents ----
inline constexpr std::int64_t kMaxJsonFileBytes = std::int64_t{16} << 20;  // 16 MiB
// Nesting of JSON arrays and objects (a plan with kMaxRegionDepth levels
// of regions needs about 2 × kMaxRegionDepth + 4).
inline constexpr int kMaxJsonDepth = 64;
// Values of one document (every number, string, array and object, the
// root included; a Python value reached twice counts twice). The largest
// document actmem writes, a plan with its prediction and exports, holds a
// few hundred; a 16 MiB file of empty objects would hold 5.6 million,
// each costing about 180 bytes once parsed.
inline constexpr std::int64_t kMaxJsonValues = std::int64_t{1} << 16;

}  // namespace actmem

// PhysicsNeMo GraphCastNet's checkpoint knobs (NVIDIA/physicsnemo,
// physicsnemo/models/graphcast/graph_cast_net.py and
// examples/weather/graphcast/train_graphcast.py; docs/trainer-exports.md):
//
//   checkpoint_encoder   one region: embedders, encoder, processor layer 0
//   checkpoint_decoder   one region: processor layer L-1, decoder embedder,
//                        decoder, output MLP
//   checkpoint_processor the inner L-2 layers, as 2(L-2) modules (edge block,
//                        node block), in `segments` regions; segments must
//                        divide 2(L-2). actmem's stages are whole layers, so
//                        only segments of whole layers are offered.
//   force_single_checkpoint  one region around the whole network; the
//                        training script applies it first, then the flags
//                        above, which would nest inside it. Nested
//                        non-reentrant checkpoints on PyTorch 2.10 keep the
//                        outer region's backward peak (measured:
//                        docs/pytorch-memory-profile.md), unlike the nested
//                        regions actmem simulates, so it is offered alone.
//
// Rollout > 1 happens only in the fine-tuning phase, which reads the
// `_finetune` keys and only ever switches checkpoints on: the one-step keys
// stay in force. On one GPU (no DDP) its processor and decoder `_finetune`
// branches call set_checkpoint_encoder instead, so the settings offered here
// keep checkpoint_{processor,decoder}_finetune false and reach the same
// state on one GPU and under DDP: the one-step keys carry the processor and
// decoder flags, and force_single_checkpoint_finetune (which resets them)
// is offered with every other flag off.
//
// concat_trick is the model's (model.h): the settings are simulated on
// PhysicsNeMo's implementation with it, and the export sets it so.
#include <algorithm>

#include "plan/trainer_knobs.h"

namespace actmem::detail {
namespace {

std::vector<int> whole_layer_segments(int layers) {
  std::vector<int> out;
  if (layers <= 2) return out;
  const int modules = 2 * (layers - 2);
  for (int s = 1; s <= modules; ++s)
    if (modules % s == 0 && (modules / s) % 2 == 0) out.push_back(s);
  return out;
}

// The regions the flags make, outermost first.
Plan plan_for(const CostGraph& g, bool encoder, int segments, bool decoder, bool single) {
  const int L = processor_steps(g);
  const int dec = decoder_stage(g);
  const int first = first_processor_stage();
  std::vector<Region> regions;
  if (encoder) regions.push_back({0, first, {}});
  if (segments > 0) {
    const int size = (L - 2) / segments;
    for (int s = first + 1; s < dec - 1; s += size) regions.push_back({s, std::min(dec - 1, s + size) - 1, {}});
  }
  if (decoder) regions.push_back({dec - 1, dec, {}});
  Plan p = empty_plan(g.stages());
  if (single)
    p.checkpoints.push_back({0, dec, std::move(regions)});
  else
    p.checkpoints = std::move(regions);
  return p;
}

}  // namespace

std::vector<KnobSetting> physicsnemo_settings(const CostGraph& g) {
  const int L = processor_steps(g);
  const bool finetune = g.run().rollout > 1;
  std::vector<int> segment_options{0};
  for (int s : whole_layer_segments(L)) segment_options.push_back(s);
  std::vector<KnobSetting> out;
  for (int single = 0; single <= 1; ++single) {
    for (int enc = 0; enc <= 1; ++enc) {
      for (int dec = 0; dec <= 1; ++dec) {
        for (int segments : segment_options) {
          if (L < 3) continue;  // GraphCastNet raises "Expected at least 3 processor layers"
          if (single && (enc || dec || segments > 0)) continue;  // no nesting (above)
          // The one-step keys stay in force in fine-tuning, which only
          // switches checkpoints on (above); concat_trick is the model's.
          nlohmann::json c = nlohmann::json::object();
          c["concat_trick"] = g.model().concat_trick;
          c["force_single_checkpoint"] = single == 1 && !finetune;
          c["checkpoint_encoder"] = enc == 1;
          c["checkpoint_processor"] = segments > 0;
          c["segments"] = std::max(segments, 1);
          c["checkpoint_decoder"] = dec == 1;
          if (finetune) {
            c["force_single_checkpoint_finetune"] = single == 1;
            c["checkpoint_encoder_finetune"] = enc == 1;
            c["checkpoint_processor_finetune"] = false;
            c["checkpoint_decoder_finetune"] = false;
          }
          out.push_back({std::move(c), plan_for(g, enc == 1, segments, dec == 1, single == 1)});
        }
      }
    }
  }
  return out;
}

}  // namespace actmem::detail

// anemoi's model=gnn knobs (ecmwf/anemoi-core, models/src/anemoi/models/
// layers/{mapper,processor,block}.py; training/src/anemoi/training/config/
// model/gnn.yaml; docs/trainer-exports.md):
//
//   model.encoder.gradient_checkpointing  the GNN forward mapper (node and
//       edge embedders, the mapper block) under one checkpoint
//   model.decoder.gradient_checkpointing  the GNN backward mapper likewise
//   model.processor.gradient_checkpointing, model.processor.num_chunks
//       the processor layers in num_chunks checkpointed chunks of
//       num_layers / num_chunks layers (num_chunks must divide num_layers);
//       processor layer 0 embeds the mesh edges, so the mesh edge embedding
//       is in chunk 0's checkpoint
//   model.{encoder,decoder}.num_chunks  splits a GNN mapper's edges into
//       contiguous chunks that run one after the other under the mapper's
//       single checkpoint, not one checkpoint each: in the backward
//       recomputation every chunk's saved tensors exist at once, so the
//       chunks do not lower the peak. actmem's edge blocks (one checkpoint
//       per block) have no model=gnn equivalent; the settings keep 1.
//       (The GraphTransformer mappers do checkpoint chunk by chunk, but they
//       are another model, which actmem does not cost.)
#include "plan/trainer_knobs.h"

namespace actmem::detail {

std::vector<KnobSetting> anemoi_settings(const CostGraph& g) {
  const int L = processor_steps(g);
  const int dec = decoder_stage(g);
  std::vector<int> chunk_options{0};  // 0: processor not checkpointed
  for (int c = 1; c <= L; ++c)
    if (L % c == 0) chunk_options.push_back(c);
  std::vector<KnobSetting> out;
  for (int enc = 0; enc <= 1; ++enc) {
    for (int chunks : chunk_options) {
      for (int decd = 0; decd <= 1; ++decd) {
        Plan p = empty_plan(g.stages());
        if (enc) p.checkpoints.push_back({0, 0, {}});
        if (chunks > 0) {
          const int size = L / chunks;
          p.checkpoints.push_back({mesh_edge_embed_stage(), first_processor_stage() + size - 1, {}});
          for (int s = first_processor_stage() + size; s < dec; s += size)
            p.checkpoints.push_back({s, s + size - 1, {}});
        }
        if (decd) p.checkpoints.push_back({dec, dec, {}});
        nlohmann::json model{
            {"encoder", {{"gradient_checkpointing", enc == 1}, {"num_chunks", 1}}},
            {"processor", {{"gradient_checkpointing", chunks > 0}, {"num_chunks", std::max(chunks, 1)}}},
            {"decoder", {{"gradient_checkpointing", decd == 1}, {"num_chunks", 1}}}};
        out.push_back({nlohmann::json{{"model", std::move(model)}}, std::move(p)});
      }
    }
  }
  return out;
}

}  // namespace actmem::detail

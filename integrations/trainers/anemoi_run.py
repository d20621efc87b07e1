"""anemoi's model=gnn components built from a config, run once, their checkpoints observed.

`observed_plan(config, processor_layers)` takes an anemoi config (the
`model:` mapping of an actmem export, loaded with OmegaConf as
anemoi-training loads its config), builds anemoi-models' own GNNForwardMapper,
GNNProcessor and GNNBackwardMapper with its encoder/processor/decoder
`gradient_checkpointing` and `num_chunks`, runs them forward on a small
random graph, and returns what ran under which checkpoint as actmem plan
regions (docs/trainer-exports.md): the forward mapper "encoder", a processor
chunk from layer a to b "processor.a".."processor.b" (chunk 0 from
"mesh_edge_embed": processor layer 0 embeds the mesh edges), the backward
mapper "decoder".
"""
import torch

import checkpoint_recorder

HIDDEN = 8
GRID, MESH = 30, 12


def _edges(sources, destinations, count, generator):
    senders = torch.randint(0, sources, (count,), generator=generator)
    receivers = torch.sort(torch.randint(0, destinations, (count,), generator=generator)).values
    return torch.stack([senders, receivers])


def build(model, processor_layers):
    """anemoi-models' three GNN components for the `model` mapping of a config."""
    from anemoi.models.layers.mapper import GNNBackwardMapper, GNNForwardMapper
    from anemoi.models.layers.processor import GNNProcessor

    common = dict(mlp_extra_layers=0, edge_dim=3, layer_kernels=None)
    encoder = GNNForwardMapper(in_channels_src=5, in_channels_dst=3, num_channels=HIDDEN,
                               num_chunks=int(model.encoder.num_chunks),
                               gradient_checkpointing=bool(model.encoder.gradient_checkpointing), **common)
    processor = GNNProcessor(num_channels=HIDDEN, num_layers=processor_layers,
                             num_chunks=int(model.processor.num_chunks),
                             gradient_checkpointing=bool(model.processor.gradient_checkpointing), **common)
    decoder = GNNBackwardMapper(in_channels_src=HIDDEN, in_channels_dst=HIDDEN, num_channels=HIDDEN,
                                out_channels_dst=2, num_chunks=int(model.decoder.num_chunks),
                                gradient_checkpointing=bool(model.decoder.gradient_checkpointing), **common)
    return encoder, processor, decoder


def forward(encoder, processor, decoder):
    """One forward pass of grid -> mesh -> mesh -> grid."""
    from anemoi.models.distributed.shapes import BipartiteGraphShardInfo, GraphShardInfo

    g = torch.Generator().manual_seed(0)
    grid = torch.randn(GRID, 5, generator=g, requires_grad=True)
    mesh = torch.randn(MESH, 3, generator=g)
    grid_latent, mesh_latent = encoder(
        (grid, mesh), batch_size=1, shard_info=BipartiteGraphShardInfo(src_nodes=[GRID], dst_nodes=[MESH]),
        edge_attr=torch.randn(60, 3, generator=g), edge_index=_edges(GRID, MESH, 60, g))
    mesh_latent = processor(
        mesh_latent, batch_size=1, shard_info=GraphShardInfo(nodes=[MESH]),
        edge_attr=torch.randn(40, 3, generator=g), edge_index=_edges(MESH, MESH, 40, g))
    out = decoder(
        (mesh_latent, grid_latent), batch_size=1, shard_info=BipartiteGraphShardInfo(src_nodes=[MESH], dst_nodes=[GRID]),
        edge_attr=torch.randn(50, 3, generator=g), edge_index=_edges(MESH, GRID, 50, g))
    return out


def regions(calls, processor, layers):
    """The recorded checkpoint calls as actmem regions {"from", "to"} (stage names)."""
    out = []
    for call in calls:
        if call.name == "GNNBaseMapper.mapper_forward":
            stage = "encoder" if call.function.__self__.__class__.__name__ == "GNNForwardMapper" else "decoder"
            out.append({"from": stage, "to": stage})
        elif call.name == "BaseProcessor.run_layer_chunk":
            first = call.args[0]
            last = first + processor.chunk_size - 1
            out.append({"from": "mesh_edge_embed" if first == 0 else f"processor.{first}", "to": f"processor.{last}"})
        else:
            raise AssertionError(f"unexpected checkpoint of {call.name}")
        if call.inner:
            raise AssertionError(f"nested checkpoints in anemoi's {call.name}")
    return out


def observed_plan(model, processor_layers):
    """Runs anemoi's components under `model` (an OmegaConf mapping) and returns the checkpoint regions."""
    import anemoi.models.layers.utils as anemoi_utils

    encoder, processor, decoder = build(model, processor_layers)
    with checkpoint_recorder.recording(anemoi_utils) as calls:
        out = forward(encoder, processor, decoder)
    out.square().mean().backward()  # the step runs through, recomputations and all
    return regions(calls, processor, processor_layers)

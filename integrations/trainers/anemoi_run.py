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

`step_setup(settings, unit_count)` is the same three components set up for
one measured training step (measure_trainer.py): at the sizes, chunks and
gradient_checkpointing keys of `settings` on random graphs of its counts,
or, with `unit_count`, at width 1 with every count `unit_count` (the
overhead calibration of integrations/pytorch/measure.py).
"""
import torch

import checkpoint_recorder

HIDDEN = 8
GRID, MESH = 30, 12


def _edges(sources, destinations, count, generator):
    senders = torch.randint(0, sources, (count,), generator=generator)
    receivers = torch.sort(torch.randint(0, destinations, (count,), generator=generator)).values
    return torch.stack([senders, receivers])


def build(model, processor_layers, hidden=HIDDEN, src_features=5, dst_features=3, edge_dim=3, out_features=2):
    """anemoi-models' three GNN components for the `model` mapping of a config."""
    from anemoi.models.layers.mapper import GNNBackwardMapper, GNNForwardMapper
    from anemoi.models.layers.processor import GNNProcessor

    common = dict(mlp_extra_layers=0, edge_dim=edge_dim, layer_kernels=None)
    encoder = GNNForwardMapper(in_channels_src=src_features, in_channels_dst=dst_features, num_channels=hidden,
                               num_chunks=int(model.encoder.num_chunks),
                               gradient_checkpointing=bool(model.encoder.gradient_checkpointing), **common)
    processor = GNNProcessor(num_channels=hidden, num_layers=processor_layers,
                             num_chunks=int(model.processor.num_chunks),
                             gradient_checkpointing=bool(model.processor.gradient_checkpointing), **common)
    decoder = GNNBackwardMapper(in_channels_src=hidden, in_channels_dst=hidden, num_channels=hidden,
                                out_channels_dst=out_features, num_chunks=int(model.decoder.num_chunks),
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


# The keys of a measured setting (validate.py's cases) and their defaults: sizes, and per
# component gradient_checkpointing and num_chunks as under anemoi-training's `model:`.
STEP_DEFAULTS = {"layers": 4, "hidden": 48, "grid_nodes": 2400, "mesh_nodes": 642, "grid2mesh_edges": 3600,
                 "mesh_edges": 5100, "mesh2grid_edges": 7200, "grid_features": 8, "mesh_features": 3, "edge_dim": 3,
                 "output_features": 4,
                 "encoder": {"gradient_checkpointing": False, "num_chunks": 1},
                 "processor": {"gradient_checkpointing": False, "num_chunks": 1},
                 "decoder": {"gradient_checkpointing": False, "num_chunks": 1}}


def step_setup(settings, unit_count=None):
    """anemoi's GNN encoder, processor and decoder configured by `settings` for one training step.

    Returns the dict physicsnemo_run.step_setup describes ("model", "run",
    "target", "checkpoint_module", "configure" (nothing to do: anemoi reads
    its keys at construction), "regions", "stages", "description").
    Graphs are random with destination-sorted edges (as anemoi's graph
    providers give them); inputs do not require grad. With `unit_count`:
    width 1 and every count `unit_count`.
    """
    from omegaconf import OmegaConf
    import anemoi.models.layers.utils as anemoi_utils
    from anemoi.models.distributed.shapes import BipartiteGraphShardInfo, GraphShardInfo

    unknown = set(settings) - set(STEP_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown anemoi settings: {', '.join(sorted(unknown))}")
    s = {**STEP_DEFAULTS, **settings}
    config = OmegaConf.create({k: {**STEP_DEFAULTS[k], **settings.get(k, {})} for k in ("encoder", "processor", "decoder")})
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    counts = {k: s[k] if unit_count is None else unit_count
              for k in ("grid_nodes", "mesh_nodes", "grid2mesh_edges", "mesh_edges", "mesh2grid_edges")}
    width = {k: s[k] if unit_count is None else 1
             for k in ("hidden", "grid_features", "mesh_features", "edge_dim", "output_features")}
    encoder, processor, decoder = build(config, s["layers"], width["hidden"], width["grid_features"],
                                        width["mesh_features"], width["edge_dim"], width["output_features"])
    model = torch.nn.ModuleList([encoder, processor, decoder])
    grid_n, mesh_n = counts["grid_nodes"], counts["mesh_nodes"]
    grid = torch.randn(grid_n, width["grid_features"], generator=g)
    mesh = torch.randn(mesh_n, width["mesh_features"], generator=g)
    graphs = [(torch.randn(counts[k], width["edge_dim"], generator=g), _edges(src, dst, counts[k], g))
              for k, src, dst in (("grid2mesh_edges", grid_n, mesh_n), ("mesh_edges", mesh_n, mesh_n),
                                  ("mesh2grid_edges", mesh_n, grid_n))]
    target = torch.randn(grid_n, width["output_features"], generator=g)

    def run():
        (g2m_attr, g2m), (mesh_attr, mesh_edges), (m2g_attr, m2g) = graphs
        grid_latent, mesh_latent = encoder(
            (grid, mesh), batch_size=1, shard_info=BipartiteGraphShardInfo(src_nodes=[grid_n], dst_nodes=[mesh_n]),
            edge_attr=g2m_attr, edge_index=g2m)
        mesh_latent = processor(mesh_latent, batch_size=1, shard_info=GraphShardInfo(nodes=[mesh_n]),
                                edge_attr=mesh_attr, edge_index=mesh_edges)
        return decoder((mesh_latent, grid_latent), batch_size=1,
                       shard_info=BipartiteGraphShardInfo(src_nodes=[mesh_n], dst_nodes=[grid_n]),
                       edge_attr=m2g_attr, edge_index=m2g)

    description = {"name": "anemoi-gnn", "architecture": "graphcast",
                   **{k: s[k] for k in ("grid_nodes", "mesh_nodes", "grid2mesh_edges", "mesh_edges",
                                        "mesh2grid_edges")},
                   # anemoi's MLP with mlp_extra_layers 0 has n_extra_layers 1: two hidden layers
                   "latent_size": s["hidden"], "mlp_hidden_layers": 2, "processor_steps": s["layers"],
                   "grid_input_features": s["grid_features"], "mesh_input_features": s["mesh_features"],
                   "edge_features": s["edge_dim"], "output_features": s["output_features"]}
    return {"model": model, "run": run, "target": target, "checkpoint_module": anemoi_utils, "configure": lambda: None,
            "regions": lambda calls: regions(calls, processor, s["layers"]),
            "stages": [("encoder", encoder), *[(f"processor.{k}", layer) for k, layer in enumerate(processor.proc)],
                       ("decoder", decoder)],
            "description": description}

"""PhysicsNeMo's GraphCastNet configured as its training script does, run once, its checkpoints observed.

`observed_plan(cfg, layers, rollout, ddp)` builds physicsnemo's own
GraphCastNet (small: a level-1 mesh on a 10 x 20 grid), applies the
checkpoint keys of `cfg` (an OmegaConf config: the actmem export loaded over
examples/weather/graphcast/conf/config.yaml's defaults) in the order and
with the calls of examples/weather/graphcast/train_graphcast.py — the
one-step keys when the trainer is made, then, for rollout > 1, the
fine-tuning keys as its training loop applies them, through the DDP wrapper
(`ddp`) or without it — runs a forward and backward pass and returns what
ran under which checkpoint as actmem plan regions (docs/trainer-exports.md):
custom_forward "encoder".."decoder" with what nests inside it,
encoder_forward "encoder".."processor.0", decoder_forward
"processor.{L-1}".."decoder", a processor segment of modules [a, b) (an edge
and a node block per layer) "processor.{1+a/2}".."processor.{b/2}".

`step_setup(settings, unit_count)` is the same model set up for one
measured training step (measure_trainer.py): GraphCastNet at the sizes and
with the one-step checkpoint keys of `settings`, or, with `unit_count`, the
same model at width 1 whose graphs all have `unit_count` nodes and edges
(the overhead calibration of integrations/pytorch/measure.py).
"""
import torch

import checkpoint_recorder

GRID = (10, 20)
HIDDEN = 8

# examples/weather/graphcast/conf/config.yaml (NVIDIA/physicsnemo): the
# defaults of the keys the export sets.
CONFIG_DEFAULTS = {
    "concat_trick": True, "segments": 1, "force_single_checkpoint": False, "checkpoint_encoder": True, "checkpoint_processor": False,
    "checkpoint_decoder": False, "force_single_checkpoint_finetune": False, "checkpoint_encoder_finetune": True,
    "checkpoint_processor_finetune": True, "checkpoint_decoder_finetune": True,
}


def build(layers, hidden=HIDDEN, grid=GRID, mesh_level=1, grid_features=4, output_features=2, concat_trick=False,
          mesh_features=3, edge_features=4):
    """PhysicsNeMo's GraphCastNet (PyG graphs, torch LayerNorm on the CPU) at these sizes."""
    from physicsnemo.models.graphcast.graph_cast_net import GraphCastNet

    return GraphCastNet(mesh_level=mesh_level, multimesh=True, input_res=tuple(grid), input_dim_grid_nodes=grid_features,
                        input_dim_mesh_nodes=mesh_features, input_dim_edges=edge_features,
                        output_dim_grid_nodes=output_features, processor_layers=layers, hidden_dim=hidden,
                        norm_type="LayerNorm", do_concat_trick=concat_trick)


def configure_one_step(model, cfg):
    """GraphCastTrainer.__init__ in train_graphcast.py: the one-step keys."""
    if cfg.force_single_checkpoint:
        model.set_checkpoint_model(True)
    if cfg.checkpoint_encoder:
        model.set_checkpoint_encoder(True)
    if cfg.checkpoint_processor:
        model.set_checkpoint_processor(cfg.segments)
    if cfg.checkpoint_decoder:
        model.set_checkpoint_decoder(True)


def configure_finetune(model, cfg, ddp):
    """The training loop's switch to fine-tuning in train_graphcast.py. Without
    the DDP wrapper (one GPU) its processor and decoder branches call
    set_checkpoint_encoder, as there."""
    if cfg.force_single_checkpoint_finetune:
        model.set_checkpoint_model(True)
    if cfg.checkpoint_encoder_finetune:
        model.set_checkpoint_encoder(True)
    if cfg.checkpoint_processor_finetune:
        model.set_checkpoint_processor(cfg.segments) if ddp else model.set_checkpoint_encoder(True)
    if cfg.checkpoint_decoder_finetune:
        model.set_checkpoint_decoder(True) if ddp else model.set_checkpoint_encoder(True)


def regions(calls, model, layers):
    """The recorded checkpoint calls as actmem regions (stage names)."""
    inner_modules = list(model.processor.processor_layers)
    out = []
    for call in calls:
        if call.name == "GraphCastNet.custom_forward":
            region = {"from": "encoder", "to": "decoder"}
        elif call.name == "GraphCastNet.encoder_forward":
            region = {"from": "encoder", "to": "processor.0"}
        elif call.name == "GraphCastNet.decoder_forward":
            region = {"from": f"processor.{layers - 1}", "to": "decoder"}
        elif call.name == "GraphCastProcessor.run_function.<locals>.custom_forward":
            code = call.function.__code__
            segment = call.function.__closure__[code.co_freevars.index("segment")].cell_contents
            start = next(i for i, m in enumerate(inner_modules) if m is segment[0])
            end = start + len(segment)
            if start % 2 or end % 2:
                raise AssertionError(f"processor segment [{start}, {end}) splits a layer")
            region = {"from": f"processor.{1 + start // 2}", "to": f"processor.{end // 2}"}
        else:
            raise AssertionError(f"unexpected checkpoint of {call.name}")
        if call.inner:
            region["inner"] = regions(call.inner, model, layers)
        out.append(region)
    return out


def observed_plan(cfg, layers, rollout, ddp=False):
    """Configures GraphCastNet from `cfg` as train_graphcast.py does and returns the checkpoint regions."""
    import physicsnemo.nn.module.gnn_layers.utils as gnn_utils

    model = build(layers, concat_trick=cfg.concat_trick)  # train_graphcast.py: do_concat_trick=cfg.concat_trick
    x = torch.randn(1, 4, *GRID, generator=torch.Generator().manual_seed(0))
    # The model keeps the checkpoint function it is given when configured:
    # configure inside the recording so that it keeps the recorder.
    with checkpoint_recorder.recording(gnn_utils) as calls:
        configure_one_step(model, cfg)
        if rollout > 1:
            configure_finetune(model, cfg, ddp)
        out = model(x)
    out.square().mean().backward()  # the step runs through, recomputations and all
    return regions(calls, model, layers)


# The keys of a measured setting (validate.py's cases) and their defaults.
STEP_DEFAULTS = {"layers": 6, "hidden": 48, "grid": [24, 48], "mesh_level": 3, "grid_features": 8, "output_features": 4,
                 "concat_trick": False, "force_single_checkpoint": False, "checkpoint_encoder": False,
                 "checkpoint_processor": False, "checkpoint_decoder": False, "segments": 1}


def graph_sizes(model):
    """actmem's model description of a built GraphCastNet: counts read off its own graphs."""
    g2m = model.g2m_graph[model.g2m_graph.edge_types[0]].edge_index
    m2g = model.m2g_graph[model.m2g_graph.edge_types[0]].edge_index
    return {"grid_nodes": model.input_res[0] * model.input_res[1], "mesh_nodes": int(model.mesh_ndata.shape[0]),
            "grid2mesh_edges": int(g2m.shape[1]), "mesh_edges": int(model.mesh_graph.edge_index.shape[1]),
            "mesh2grid_edges": int(m2g.shape[1])}


def _to_unit_graphs(model, count, generator):
    """Every graph of `model` (built at width 1) replaced by random ones with `count` nodes and edges."""
    def edges():
        return torch.randint(0, count, (2, count), generator=generator)

    model.g2m_graph[model.g2m_graph.edge_types[0]].edge_index = edges()
    model.m2g_graph[model.m2g_graph.edge_types[0]].edge_index = edges()
    model.mesh_graph.edge_index = edges()
    model.g2m_edata, model.mesh_edata, model.m2g_edata = (torch.randn(count, 1, generator=generator) for _ in range(3))
    model.mesh_ndata = torch.randn(count, 1, generator=generator)
    model.input_res = (1, count)


def step_setup(settings, unit_count=None):
    """GraphCastNet configured by `settings` (STEP_DEFAULTS' keys) for one training step.

    Returns a dict: "model"; "run" (the forward pass: input -> prediction);
    "target"; "checkpoint_module" (where PhysicsNeMo looks up `checkpoint`);
    "configure" (applies the one-step keys as train_graphcast.py does; call it
    while that module's `checkpoint` is patched, since the model keeps the
    function it is given); "regions" (checkpoint_recorder calls -> actmem
    regions); "stages" ((label, module) pairs, in forward order, for labelling
    ops); "description" (actmem's model description of these sizes, counts
    from the built graphs). With `unit_count`: width 1 and every count
    `unit_count`, for the overhead calibration.
    """
    from omegaconf import OmegaConf
    import physicsnemo.nn.module.gnn_layers.utils as gnn_utils

    s = {**STEP_DEFAULTS, **settings}
    unknown = set(settings) - set(STEP_DEFAULTS)
    if unknown:
        raise ValueError(f"unknown PhysicsNeMo settings: {', '.join(sorted(unknown))}")
    generator = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    if unit_count is None:
        model = build(s["layers"], s["hidden"], s["grid"], s["mesh_level"], s["grid_features"], s["output_features"],
                      s["concat_trick"])
        features, outputs = s["grid_features"], s["output_features"]
    else:
        model = build(s["layers"], 1, s["grid"], 1, 1, 1, s["concat_trick"], mesh_features=1, edge_features=1)
        _to_unit_graphs(model, unit_count, generator)
        features = outputs = 1
    x = torch.randn(1, features, *model.input_res, generator=generator)
    target = torch.randn(1, outputs, *model.input_res, generator=generator)
    cfg = OmegaConf.create({**CONFIG_DEFAULTS, **{k: s[k] for k in CONFIG_DEFAULTS if k in s}})
    layers = s["layers"]
    description = {"name": "physicsnemo-graphcastnet", "architecture": "graphcast", **graph_sizes(model),
                   "latent_size": s["hidden"], "mlp_hidden_layers": 1, "processor_steps": layers,
                   "grid_input_features": s["grid_features"], "mesh_input_features": 3, "edge_features": 4,
                   "output_features": s["output_features"]}
    return {"model": model, "run": lambda: model(x), "target": target, "checkpoint_module": gnn_utils,
            "configure": lambda: configure_one_step(model, cfg),
            "regions": lambda calls: regions(calls, model, layers),
            "stages": [("encoder_embedder", model.encoder_embedder), ("encoder", model.encoder),
                       ("processor.0", model.processor_encoder),
                       *[(f"processor.{1 + i // 2}.{'edge' if i % 2 == 0 else 'node'}", m)
                         for i, m in enumerate(model.processor.processor_layers)],
                       (f"processor.{layers - 1}", model.processor_decoder), ("decoder_embedder", model.decoder_embedder),
                       ("decoder", model.decoder), ("finale", model.finale)],
            "description": description}

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
"""
import torch

import checkpoint_recorder

GRID = (10, 20)
HIDDEN = 8

# examples/weather/graphcast/conf/config.yaml (NVIDIA/physicsnemo): the
# defaults of the keys the export sets.
CONFIG_DEFAULTS = {
    "segments": 1, "force_single_checkpoint": False, "checkpoint_encoder": True, "checkpoint_processor": False,
    "checkpoint_decoder": False, "force_single_checkpoint_finetune": False, "checkpoint_encoder_finetune": True,
    "checkpoint_processor_finetune": True, "checkpoint_decoder_finetune": True,
}


def build(layers):
    from physicsnemo.models.graphcast.graph_cast_net import GraphCastNet

    return GraphCastNet(mesh_level=1, multimesh=True, input_res=GRID, input_dim_grid_nodes=4, input_dim_mesh_nodes=3,
                        input_dim_edges=4, output_dim_grid_nodes=2, processor_layers=layers, hidden_dim=HIDDEN,
                        norm_type="LayerNorm")


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

    model = build(layers)
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

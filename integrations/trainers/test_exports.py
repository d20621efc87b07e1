"""actmem's trainer exports, pasted into the trainers' own code, run what actmem predicted.

For each case, `actmem plan … -o plan.json --export TRAINER` prints the
trainer's snippet; the snippet is loaded as the trainer loads its config
(OmegaConf, over the trainer's defaults), handed to the trainer's own model
classes, a training step is run, and the functions the trainer ran under
torch.utils.checkpoint are compared with the plan the export says the
trainer runs (`exports.TRAINER.plan`, the plan actmem simulated for
`predicted`). Needs the environment of scripts/install-torch.sh and
ACTMEM_BIN (the actmem binary).
"""
import json
import os
import subprocess

import pytest

import trainer_packages

ACTMEM = os.environ.get("ACTMEM_BIN", "actmem")
LAYERS = 16  # graphcast-small's processor steps: the trainers' models are built with as many

# (budget, rollout) for graphcast-small on PyTorch: settings with and without
# each trainer's checkpoints, one-step and fine-tuning keys.
CASES = [("4GiB", 1), ("4GiB", 4), ("6GiB", 1), ("10GiB", 1), ("10GiB", 4), ("20GiB", 1), ("20GiB", 4)]


def export(tmp_path, trainer, budget, rollout):
    """(snippet text, export entry) from actmem."""
    plan_file = tmp_path / "plan.json"
    run = subprocess.run([ACTMEM, "plan", "--model", "graphcast-small", "--device", "a100-80gb", "--framework",
                          "pytorch", "--budget", budget, "--rollout", str(rollout), "-o", str(plan_file),
                          "--export", trainer], capture_output=True, text=True, check=True)
    return run.stdout, json.loads(plan_file.read_text())["exports"][trainer]


def flat(regions):
    """Regions as comparable tuples, inner regions included."""
    return sorted((r["from"], r["to"], tuple(flat(r.get("inner", [])))) for r in regions)


# anemoi-training's model=gnn defaults for the keys the export sets
# (training/src/anemoi/training/config/model/gnn.yaml, anemoi-core).
ANEMOI_GNN_DEFAULTS = {"model": {"encoder": {"gradient_checkpointing": True, "num_chunks": 1},
                                 "processor": {"gradient_checkpointing": True, "num_chunks": 2},
                                 "decoder": {"gradient_checkpointing": True, "num_chunks": 1}}}


@pytest.mark.parametrize("budget,rollout", CASES)
def test_anemoi_snippet_runs_the_exported_plan(tmp_path, budget, rollout):
    trainer_packages.require("torch", "anemoi-models", "omegaconf")
    from omegaconf import OmegaConf

    import anemoi_run

    snippet, entry = export(tmp_path, "anemoi", budget, rollout)
    config = OmegaConf.merge(OmegaConf.create(ANEMOI_GNN_DEFAULTS), OmegaConf.create(snippet))
    observed = anemoi_run.observed_plan(config.model, LAYERS)
    assert flat(observed) == flat(entry["plan"]["checkpoints"])
    assert not entry["plan"].get("edge_blocks")


def test_anemoi_gnn_mapper_chunks_share_one_checkpoint():
    """The fact the anemoi export rests on: num_chunks does not add checkpoints to a GNN mapper."""
    trainer_packages.require("torch", "anemoi-models", "omegaconf")
    from omegaconf import OmegaConf

    import anemoi_run

    config = OmegaConf.create(ANEMOI_GNN_DEFAULTS)
    config.model.encoder.num_chunks = 4
    config.model.decoder.num_chunks = 8
    observed = anemoi_run.observed_plan(config.model, 4)
    assert observed == [{"from": "encoder", "to": "encoder"}, {"from": "mesh_edge_embed", "to": "processor.1"},
                        {"from": "processor.2", "to": "processor.3"}, {"from": "decoder", "to": "decoder"}]


# GraphCastNet's PyG graph backend needs torch-sparse and torch-scatter.
PHYSICSNEMO_PACKAGES = ("torch", "nvidia-physicsnemo", "torch-geometric", "torch-sparse", "torch-scatter", "omegaconf")


@pytest.mark.parametrize("budget,rollout", CASES)
@pytest.mark.parametrize("ddp", [False, True], ids=["one-gpu", "ddp"])
def test_physicsnemo_snippet_runs_the_exported_plan(tmp_path, budget, rollout, ddp):
    if rollout == 1 and ddp:
        pytest.skip("the DDP wrapper only changes the fine-tuning branches")
    trainer_packages.require(*PHYSICSNEMO_PACKAGES)
    from omegaconf import OmegaConf

    import physicsnemo_run

    snippet, entry = export(tmp_path, "physicsnemo", budget, rollout)
    config = OmegaConf.merge(OmegaConf.create(physicsnemo_run.CONFIG_DEFAULTS), OmegaConf.create(snippet))
    observed = physicsnemo_run.observed_plan(config, LAYERS, rollout, ddp)
    assert flat(observed) == flat(entry["plan"]["checkpoints"])
    # predicted is PhysicsNeMo's implementation of this model (no concat_trick): the snippet turns off the
    # example's default concat_trick: true, so the model the trainer builds is the one simulated.
    assert entry["implementation"] == "physicsnemo" and config.concat_trick is False
    assert not entry["plan"].get("edge_blocks")


def test_physicsnemo_finetune_branches_without_ddp_turn_on_the_encoder():
    """The fact the rollout > 1 export works around: on one GPU, checkpoint_processor_finetune
    and checkpoint_decoder_finetune switch on the encoder checkpoint, not theirs."""
    trainer_packages.require(*PHYSICSNEMO_PACKAGES)
    from omegaconf import OmegaConf

    import physicsnemo_run

    config = OmegaConf.create(physicsnemo_run.CONFIG_DEFAULTS)
    config.checkpoint_encoder = False
    config.checkpoint_encoder_finetune = False
    one_gpu = physicsnemo_run.observed_plan(config, 4, rollout=2, ddp=False)
    ddp = physicsnemo_run.observed_plan(config, 4, rollout=2, ddp=True)
    assert one_gpu == [{"from": "encoder", "to": "processor.0"}]
    assert flat(ddp) == flat([{"from": "processor.1", "to": "processor.2"}, {"from": "processor.3", "to": "decoder"}])


def test_a_missing_trainer_package_is_one_line():
    error = trainer_packages.problem("torch")
    assert error is None
    trainer_packages.PINNED["no-such-trainer"] = ("1.0", "no_such_trainer")
    try:
        with pytest.raises(trainer_packages.TrainerPackageError) as raised:
            trainer_packages.require("no-such-trainer")
        assert str(raised.value) == "no-such-trainer 1.0: not installed (run scripts/install-torch.sh)"
    finally:
        del trainer_packages.PINNED["no-such-trainer"]

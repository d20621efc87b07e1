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

#!/usr/bin/env python3
"""Measures one training step of a trainer's own model (PhysicsNeMo's GraphCastNet, anemoi's GNN
components) with the allocator method of integrations/pytorch, and prints the figures as JSON.

The method is integrations/pytorch/measure.py's (docs/pytorch-memory-profile.md):
glibc's live bytes (mallinfo.py, under its malloc settings; this script
re-execs itself with them) sampled after every dispatched aten op of the
forward pass, the MSE loss, the backward pass and checkpoint recomputation
(op_meter.py), one warm-up step and then one measured step, and the per-op
non-tensor overhead removed with two copies of the model at width 1 whose
every count is n and 2n (measure.subtract_overhead).

  activation_bytes_after_forward  live bytes when forward and loss are done
      (only the loss referenced), above the level just before the forward pass
  peak_dynamic_bytes  the peak over the whole step above that same level
      (parameter gradients start as None, so they count)

The trainer's own code runs its own checkpoints: the functions it runs under
torch.utils.checkpoint are recorded (checkpoint_recorder.py) and reported as
actmem plan regions ("regions"), with actmem's description of the model's
sizes ("description", counts read off the trainer's own graphs), so that
validate.py can ask actmem for the same step.

usage: measure_trainer.py --case JSON [--timeline FILE.csv]
  JSON: {"trainer": "physicsnemo" | "anemoi", "settings": {...}}: the keys of
  physicsnemo_run.STEP_DEFAULTS / anemoi_run.STEP_DEFAULTS.
Exit 0 with the JSON on stdout; 2 with one line `actmem: error: ...` on bad
input or a missing trainer package.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTORCH = os.path.join(os.path.dirname(HERE), "pytorch")
sys.path[:0] = [HERE, PYTORCH]

from mallinfo import ensure_malloc_env, live_bytes  # noqa: E402  (no torch import)

UNIT_COUNT = 16  # n of the calibration copies; anemoi's chunk counts (at most 16) divide it
PACKAGES = {"physicsnemo": ("torch", "nvidia-physicsnemo", "torch-geometric", "torch-sparse", "torch-scatter",
                            "omegaconf"),
            "anemoi": ("torch", "anemoi-models", "torch-geometric", "omegaconf")}


class _Labels:
    """The meter currently sampling, so that hooks and the checkpoint wrapper can label its ops."""

    def __init__(self):
        self.meter = None


@contextlib.contextmanager
def _recompute_labels(module, labels: _Labels):
    """Patches `module.checkpoint` so that a checkpointed function run after the
    forward pass (the recomputation) labels its ops phase "recompute". Enter it
    before checkpoint_recorder.recording, so the recorder sees the trainer's own
    function; a model that keeps the patched function (PhysicsNeMo) keeps labelling."""
    real = module.checkpoint

    def checkpoint(function, *args, **kwargs):
        def run(*a, **k):
            meter = labels.meter
            if meter is None or meter.phase == "forward":
                return function(*a, **k)
            with meter.labelled(phase="recompute"):
                return function(*a, **k)
        return real(run, *args, **kwargs)

    module.checkpoint = checkpoint
    try:
        yield
    finally:
        module.checkpoint = real


def _stage_hooks(stages, labels: _Labels):
    """Forward pre-hooks that label ops (forward and recompute) with the stage running."""
    def hook(name):
        def set_stage(module, args):
            if labels.meter is not None:
                labels.meter.stage = name
        return set_stage
    return [module.register_forward_pre_hook(hook(name)) for name, module in stages]


def _step(setup: dict, labels: _Labels, record: bool) -> dict:
    """One training step (forward, MSE loss, backward) under an OpMeter; bytes above the level before it."""
    import torch.nn.functional as F
    from op_meter import OpMeter

    setup["model"].zero_grad(set_to_none=True)
    meter = OpMeter(0, record=record)
    labels.meter = meter
    gc.collect()
    meter.base = base = live_bytes()
    with meter:
        pred = setup["run"]()
        with meter.labelled(stage="loss"):
            loss = F.mse_loss(pred, setup["target"])
        del pred
        after_forward = live_bytes() - base
        forward_ops = meter.count
        with meter.labelled(phase="backward", stage=""):
            loss.backward()
        del loss
    after_backward = live_bytes() - base
    labels.meter = None
    return {"after_forward": after_forward, "after_backward": after_backward, "forward_ops": forward_ops,
            "rows": meter.recorded()}


def measure_setup(setup: dict) -> tuple[dict, list]:
    """Configures the trainer's checkpoints (recording them), runs a warm-up step, then a measured one.
    Returns (the measured step, the checkpoint regions the trainer ran)."""
    import checkpoint_recorder

    labels = _Labels()
    hooks = _stage_hooks(setup["stages"], labels)
    module = setup["checkpoint_module"]
    try:
        with _recompute_labels(module, labels):
            with checkpoint_recorder.recording(module) as calls:
                setup["configure"]()
                # warm-up: its forward pass is the one whose checkpoints are recorded
                import torch.nn.functional as F
                from op_meter import OpMeter
                meter = OpMeter(0)
                labels.meter = meter
                with meter:
                    pred = setup["run"]()
                    loss = F.mse_loss(pred, setup["target"])
                    del pred
            with meter:
                loss.backward()
            del loss
            labels.meter = None
            regions = setup["regions"](calls)
            measured = _step(setup, labels, record=True)
    finally:
        for h in hooks:
            h.remove()
    return measured, regions


def measure(trainer: str, settings: dict, timeline: str | None = None) -> dict:
    """The step's figures for `settings` of `trainer` (see the module doc)."""
    import torch
    import trainer_packages
    from measure import subtract_overhead

    trainer_packages.require(*PACKAGES[trainer])
    torch.set_num_threads(1)
    adapter = __import__({"physicsnemo": "physicsnemo_run", "anemoi": "anemoi_run"}[trainer])
    start = time.time()
    setup = adapter.step_setup(settings)
    real, regions = measure_setup(setup)
    parameter_bytes = sum(p.numel() * p.element_size() for p in setup["model"].parameters())
    description = setup["description"]
    del setup
    units = []
    for count in (UNIT_COUNT, 2 * UNIT_COUNT):
        unit = adapter.step_setup(settings, unit_count=count)
        units.append(measure_setup(unit)[0])
        del unit
    cal = subtract_overhead(real, units)
    rows, live = real["rows"], cal["live"]
    peak_i = max(range(len(live)), key=live.__getitem__)
    after_forward = real["after_forward"] - cal["after_forward"]
    phases = [r[1] for r in rows]
    if timeline:
        with open(timeline, "w") as f:
            f.write("index,op,phase,stage,live_bytes,raw_live_bytes\n")
            for i, ((op, phase, stage, raw), o) in enumerate(zip(rows, cal["overhead"])):
                f.write(f"{i},{op},{phase},{stage},{raw - o},{raw}\n")
    return {
        "trainer": trainer, "settings": settings, "description": description, "regions": regions,
        "activation_bytes_after_forward": after_forward,
        "peak_dynamic_bytes": max(live[peak_i], after_forward),
        "peak_at": {"op_index": peak_i, "op": str(rows[peak_i][0]), "phase": rows[peak_i][1],
                    "stage": rows[peak_i][2]},
        "forward_peak_bytes": max(live[:real["forward_ops"]], default=0),
        "bytes_after_backward": real["after_backward"] - cal["after_backward"],
        "parameter_bytes": parameter_bytes,
        "ops": {p: phases.count(p) for p in ("forward", "backward", "recompute")},
        "calibrated": cal["calibrated"],
        "raw": {"activation_bytes_after_forward": real["after_forward"], "peak_dynamic_bytes": max(r[3] for r in rows)},
        "overhead": {"activation_bytes_after_forward": cal["after_forward"], "at_peak": cal["overhead"][peak_i]},
        "torch": torch.__version__,
        "seconds": round(time.time() - start, 1),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="measure_trainer.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--case", required=True, help='JSON: {"trainer": ..., "settings": {...}}')
    p.add_argument("--timeline", help="write one CSV row per op here")
    args = p.parse_args(argv)
    ensure_malloc_env()
    try:
        case = json.loads(args.case)
        trainer, settings = case["trainer"], case.get("settings", {})
        if trainer not in PACKAGES or not isinstance(settings, dict):
            raise ValueError(f"trainer: expected one of {', '.join(PACKAGES)} and settings an object")
    except (ValueError, KeyError, TypeError) as error:
        print(f"actmem: error: --case: {error}", file=sys.stderr)
        return 2
    import trainer_packages
    try:
        result = measure(trainer, settings, args.timeline)
    except trainer_packages.TrainerPackageError as error:
        print(f"actmem: error: {error}", file=sys.stderr)
        return 2
    except ValueError as error:  # settings the adapter or the trainer refuses
        print(f"actmem: error: {trainer}: {str(error).splitlines()[0]}", file=sys.stderr)
        return 2
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reading an actmem plan file (docs/plan-format.md) and running the JAX
reference network under it.

A plan is:
  * regions: checkpoint regions over the stage chain, nested to any depth.
    Stages first..last run inside one jax.checkpoint(policy=nothing_saveable):
    only the region's inputs (the latents it reads from before it, the cast
    parameters and the network inputs) are kept for the backward pass, and
    the region is recomputed there. Inner regions are checkpoints inside it.
  * edge_blocks: {stage: B}; the stage's edge update runs in B contiguous
    blocks of edges, each under its own jax.checkpoint (graphcast_jax.edge_update).
  * step_checkpoint (this integration's field; DeepMind's
    gradient_checkpointing): the whole rollout step under jax.checkpoint,
    applied by graphcast_jax.make_loss when rollout > 1.
  * host_offload (with step_checkpoint): each step checkpoint's kept input
    (the carried frames) offloaded to host memory, and the rollout's
    targets an argument in host memory (graphcast_jax.make_loss).
For rollout > 1 the plan applies to every step.

Errors are InputError: the file, a JSON pointer into it, what was expected.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial

import jax

from graphcast_jax import (EDGE_STAGE_KINDS, Description, InputError, NetworkInputs, range_io, run_stage, stage_kind,
                           stage_names, stage_reads)

# Fields of a plan file; a partial file may hold only the plan's own ones.
PLAN_FIELDS = ("checkpoints", "edge_blocks", "stages", "step_checkpoint", "host_offload")
FILE_FIELDS = PLAN_FIELDS + ("format", "version", "model", "run", "device", "budget_bytes", "predicted", "exports")
REGION_FIELDS = ("from", "to", "inner")


@dataclass(frozen=True)
class Region:
    first: int  # stage index, inclusive
    last: int   # stage index, inclusive
    inner: tuple["Region", ...] = ()


@dataclass(frozen=True)
class Plan:
    stages: tuple[str, ...]
    regions: tuple[Region, ...] = ()
    edge_blocks: dict[str, int] = field(default_factory=dict)
    step_checkpoint: bool = False
    host_offload: bool = False

    def blocks(self, stage: str) -> int:
        return self.edge_blocks.get(stage, 1)

    def to_json(self) -> dict:
        """The plan's own fields, as a partial plan file (docs/plan-format.md)."""
        def region(r: Region) -> dict:
            out = {"from": self.stages[r.first], "to": self.stages[r.last]}
            return {**out, "inner": [region(i) for i in r.inner]} if r.inner else out

        return {"stages": list(self.stages), "checkpoints": [region(r) for r in self.regions],
                "edge_blocks": dict(self.edge_blocks), "step_checkpoint": self.step_checkpoint,
                **({"host_offload": True} if self.host_offload else {})}


# ---------------------------------------------------------------- reading

def read_json(path: str) -> dict:
    """The JSON object in `path`; InputError when unreadable or not an object."""
    try:
        with open(path) as f:
            obj = json.load(f)
    except OSError as e:
        raise InputError(path, "", f"cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise InputError(path, "", f"invalid JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    if not isinstance(obj, dict):
        raise InputError(path, "", "expected a JSON object")
    return obj


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def parse_plan(obj: dict, d: Description, source: str) -> Plan:
    """Validates a plan object (a whole plan file or a partial one) against the model."""
    for key in obj:
        if key not in FILE_FIELDS:
            raise InputError(source, f"/{_escape(key)}", f"unknown field (expected one of {', '.join(FILE_FIELDS)})")
    if obj.get("format", "actmem.plan") != "actmem.plan" or obj.get("version", 1) != 1:
        bad = "format" if obj.get("format", "actmem.plan") != "actmem.plan" else "version"
        raise InputError(source, f"/{bad}", "expected format \"actmem.plan\", version 1")
    stages = tuple(stage_names(d.processor_steps))
    if "stages" in obj and obj["stages"] != list(stages):
        raise InputError(source, "/stages", f"expected the model's stages {stages[0]}, {stages[1]}, "
                         f"processor.0 .. processor.{d.processor_steps - 1}, {stages[-1]}")
    step_checkpoint = obj.get("step_checkpoint", False)
    if not isinstance(step_checkpoint, bool):
        raise InputError(source, "/step_checkpoint", f"expected true or false, got {step_checkpoint!r}")
    host_offload = obj.get("host_offload", False)
    if not isinstance(host_offload, bool):
        raise InputError(source, "/host_offload", f"expected true or false, got {host_offload!r}")
    if host_offload and not step_checkpoint:
        raise InputError(source, "/host_offload", "expected only with \"step_checkpoint\": true")
    reader = _RegionReader(stages, source)
    regions = reader.regions(obj.get("checkpoints", []), "/checkpoints", 0, len(stages) - 1)
    return Plan(stages, regions, _edge_blocks(obj.get("edge_blocks", {}), d, stages, source), step_checkpoint,
                host_offload)


class _RegionReader:
    def __init__(self, stages: tuple[str, ...], source: str):
        self.stages, self.source = stages, source
        self.index = {s: i for i, s in enumerate(stages)}

    def fail(self, pointer: str, expected: str):
        raise InputError(self.source, pointer, expected)

    def stage(self, value, pointer: str) -> int:
        if value not in self.index:
            self.fail(pointer, f"expected a stage name ({self.stages[0]}, {self.stages[1]}, processor.0 .. "
                      f"processor.{len(self.stages) - 4}, {self.stages[-1]}), got {value!r}")
        return self.index[value]

    def name(self, first: int, last: int) -> str:
        return f"{self.stages[first]}..{self.stages[last]}"

    def regions(self, items, pointer: str, lo: int, hi: int) -> tuple[Region, ...]:
        """Regions listed at `pointer`, all inside stages lo..hi, none overlapping; sorted."""
        if not isinstance(items, list):
            self.fail(pointer, "expected a list of regions")
        out = sorted(((self.region(item, f"{pointer}/{j}", lo, hi), j) for j, item in enumerate(items)),
                     key=lambda rj: rj[0].first)
        for (a, ja), (b, jb) in zip(out, out[1:]):
            if b.first <= a.last:
                self.fail(f"{pointer}/{jb}", f"expected a region disjoint from the others; "
                          f"{self.name(b.first, b.last)} overlaps {pointer}/{ja} ({self.name(a.first, a.last)})")
        return tuple(r for r, _ in out)

    def region(self, item, pointer: str, lo: int, hi: int) -> Region:
        if not isinstance(item, dict) or "from" not in item or "to" not in item:
            self.fail(pointer, 'expected {"from": STAGE, "to": STAGE, "inner": [REGION, ...]}')
        for key in item:
            if key not in REGION_FIELDS:
                self.fail(f"{pointer}/{_escape(key)}", "unknown field (expected from, to, inner)")
        first, last = self.stage(item["from"], pointer + "/from"), self.stage(item["to"], pointer + "/to")
        if first > last:
            self.fail(pointer, f"expected 'from' no later than 'to', got {self.name(first, last)}")
        if first < lo or last > hi:
            self.fail(pointer, f"expected a region inside its enclosing region {self.name(lo, hi)}, "
                      f"got {self.name(first, last)}")
        return Region(first, last, self.regions(item.get("inner", []), pointer + "/inner", first, last))


def _edge_blocks(blocks, d: Description, stages: tuple[str, ...], source: str) -> dict[str, int]:
    if not isinstance(blocks, dict):
        raise InputError(source, "/edge_blocks", "expected an object {STAGE: B}")
    for stage, b in blocks.items():
        pointer = f"/edge_blocks/{_escape(stage)}"
        if stage not in stages or stage_kind(stage) not in EDGE_STAGE_KINDS:
            raise InputError(source, pointer, f"expected a stage with an edge update (encoder, processor.0 .. "
                             f"processor.{d.processor_steps - 1}, decoder), got {stage!r}")
        edges = d.edges(stage)
        if not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= edges:
            raise InputError(source, pointer, f"expected an integer in 1..{edges} (the stage's edges), got {b!r}")
    return dict(blocks)


# ---------------------------------------------------------------- running

def network(plan: Plan):
    """The network under `plan`: fn(cast params, NetworkInputs) -> prediction."""
    def run(params: dict, x: NetworkInputs):
        return _run_range(plan, params, x, 0, len(plan.stages) - 1, plan.regions, {}, ("pred",))["pred"]

    return run


def _run_range(plan: Plan, params, x, first: int, last: int, regions, latents: dict, keep) -> dict:
    """Runs stages first..last on `latents`, each region of `regions` under
    one checkpoint; returns the latents named in `keep` (and any others live)."""
    starts = {r.first: r for r in regions}
    i = first
    while i <= last:
        region = starts.get(i)
        end = i if region is None else region.last
        if region is None:
            stage = plan.stages[i]
            latents.update(run_stage(stage, params, x, {n: latents[n] for n in stage_reads(stage)},
                                     plan.blocks(stage)))
        else:
            needed = set(keep).union(*(stage_reads(s) for s in plan.stages[end + 1:last + 1]))
            reads, writes = range_io(plan.stages, i, end)
            outs = sorted(writes & needed)
            fn = jax.checkpoint(partial(_region, plan, region, reads, outs),
                                policy=jax.checkpoint_policies.nothing_saveable)
            latents.update(zip(outs, fn(params, x, *(latents[n] for n in reads))))
        i = end + 1
    return latents


def _region(plan: Plan, region: Region, reads: list[str], outs: list[str], params, x, *values):
    latents = _run_range(plan, params, x, region.first, region.last, region.inner, dict(zip(reads, values)), outs)
    return tuple(latents[n] for n in outs)

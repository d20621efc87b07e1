"""Reading an actmem plan (docs/plan-format.md) and running the reference model under it.

A plan here is two things:
  * regions: nested checkpoint regions over the stage chain. Stages
    first..last run inside one torch.utils.checkpoint.checkpoint call; only
    the latents the region reads from before it (plus model inputs and
    parameters) are kept for backward. Inner regions nest inside.
  * edge_blocks: {stage: B}; B > 1 runs that stage's edge update in B
    contiguous edge blocks, each under its own checkpoint. B == 1 (or
    missing) is the plain, unblocked update.
How checkpoints are made (torch 1.13, measured: docs/pytorch-memory-profile.md):
  * top level: non-reentrant (use_reentrant=False), which works when the
    region's inputs do not require grad (the encoder's).
  * nested inside another checkpoint (inner regions, and edge blocks of a
    stage inside a region): reentrant. A nested non-reentrant checkpoint
    keeps its inputs alive from the forward pass (its closure holds them),
    so nesting would save nothing; the reentrant one saves its inputs with
    save_for_backward, which the enclosing checkpoint's hooks drop. A nested
    region without inputs that require grad stays non-reentrant (it holds no
    inputs, and reentrant would lose its parameter gradients).
  * no RNG stashing: the model is deterministic, and a stash would add a
    5 KiB RNG-state tensor per checkpoint call.

Built-in plan names: none, full (each stage its own region), every:K
(processor steps in groups of K), deepmind (encoder, decoder, processor
groups of 3, encoder/decoder edge blocks of 4 unless overridden).
"""
from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.utils.checkpoint

from graphcast_reference import GraphCast, Inputs, range_io, stage_reads

EDGE_COUNT_FIELD = {"encoder": "grid2mesh_edges", "processor": "mesh_edges", "decoder": "mesh2grid_edges"}


class PlanError(ValueError):
    """A plan that does not fit the model; the message names the field."""


@dataclass(frozen=True)
class Region:
    first: int  # stage index, inclusive
    last: int   # stage index, inclusive
    inner: tuple["Region", ...] = ()


@dataclass
class Plan:
    stages: list[str]
    regions: tuple[Region, ...] = ()
    edge_blocks: dict[str, int] = field(default_factory=dict)
    # torch >= 2.4 selective activation checkpointing: the context_fn handed
    # to the regions' non-reentrant checkpoints (selective_context); None:
    # plain checkpoints.
    context_fn: object = None

    def blocks(self, stage: str) -> int:
        return self.edge_blocks.get(stage, 1)


def checkpoint(fn, *args, nested: bool = False, context_fn=None):
    """fn(*args) under a checkpoint; `nested` when inside another checkpoint.
    context_fn (selective checkpointing) applies to non-reentrant ones only."""
    reentrant = nested and any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
    extra = {"context_fn": context_fn} if context_fn is not None and not reentrant else {}
    return torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=reentrant, preserve_rng_state=False, **extra)


SELECTIVE_POLICIES = ("mm",)


def selective_context(policy: str):
    """A context_fn for torch.utils.checkpoint (torch >= 2.4) under which a
    region keeps the outputs its policy names from the forward pass and
    recomputes the rest. "mm": the matmuls' (aten.mm, aten.addmm) outputs."""
    if policy not in SELECTIVE_POLICIES:
        raise PlanError(f"--selective: unknown policy '{policy}': expected one of {', '.join(SELECTIVE_POLICIES)}")
    try:
        from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    except ImportError as err:
        raise PlanError(f"--selective: torch {torch.__version__} has no selective checkpointing ({err})") from err
    saved = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}

    def decide(ctx, op, *args, **kwargs):
        return CheckpointPolicy.MUST_SAVE if op in saved else CheckpointPolicy.PREFER_RECOMPUTE
    return partial(create_selective_checkpoint_contexts, decide)


class Tracer:
    """Measurement hooks for forward(); this default does nothing."""

    def stage(self, name: str):
        """Context in which stage `name` runs (forward, and recompute of regions)."""
        return contextlib.nullcontext()

    def stage_done(self, name: str, outputs: dict):
        """Called after stage `name` has produced `outputs` (latent name -> tensor)."""

    def checkpointed(self, fn, stage: str):
        """Wraps each function handed to checkpoint (a region starting at
        `stage`, or an edge block of `stage`); it runs again on recompute."""
        return fn


# ---------------------------------------------------------------- reading

def builtin_plan(name: str, stages: list[str], edge_blocks: int | None = None) -> Plan:
    n = len(stages)
    steps = [i for i, s in enumerate(stages) if s.startswith("processor.")]
    if name == "none":
        regions = ()
    elif name == "full":
        regions = tuple(Region(i, i) for i in range(n))
    elif name.startswith("every:"):
        try:
            k = int(name[len("every:"):])
        except ValueError:
            k = 0
        if k < 1:
            raise PlanError(f"plan '{name}': expected every:K with K a positive integer")
        regions = tuple(Region(steps[j], steps[min(j + k, len(steps)) - 1]) for j in range(0, len(steps), k))
    elif name == "deepmind":
        groups = tuple(Region(steps[j], steps[min(j + 3, len(steps)) - 1]) for j in range(0, len(steps), 3))
        regions = (Region(0, 0),) + groups + (Region(n - 1, n - 1),)
        b = 4 if edge_blocks is None else edge_blocks
        return Plan(stages, regions, {"encoder": b, "decoder": b})
    else:
        raise PlanError(f"unknown plan '{name}': expected a file, none, full, every:K or deepmind")
    blocks = {} if edge_blocks is None else {"encoder": edge_blocks, "decoder": edge_blocks}
    return Plan(stages, regions, blocks)


def parse_plan(obj: dict, stages: list[str], edge_counts: dict[str, int], source: str = "plan") -> Plan:
    """Validates a plan JSON object against the model's stages and edge counts."""
    if not isinstance(obj, dict):
        raise PlanError(f"{source}: expected a JSON object")
    if "stages" in obj and obj["stages"] != stages:
        raise PlanError(f"{source}: field 'stages': plan was made for {obj['stages']}, model has {stages}")
    index = {s: i for i, s in enumerate(stages)}

    def stage_index(value, where):
        if value not in index:
            raise PlanError(f"{source}: field '{where}': unknown stage {value!r} "
                            f"(model stages: {stages[0]} .. {stages[-1]})")
        return index[value]

    def regions(items, where, lo, hi):
        if not isinstance(items, list):
            raise PlanError(f"{source}: field '{where}': expected a list of regions")
        out = []
        for j, item in enumerate(items):
            w = f"{where}[{j}]"
            if not isinstance(item, dict) or "from" not in item or "to" not in item:
                raise PlanError(f"{source}: field '{w}': expected {{\"from\": STAGE, \"to\": STAGE}}")
            first, last = stage_index(item["from"], w + ".from"), stage_index(item["to"], w + ".to")
            if first > last:
                raise PlanError(f"{source}: field '{w}': 'from' {item['from']} comes after 'to' {item['to']}")
            if first < lo or last > hi:
                raise PlanError(f"{source}: field '{w}': region {item['from']}..{item['to']} "
                                f"is not inside its enclosing region {stages[lo]}..{stages[hi]}")
            out.append(Region(first, last, regions(item.get("inner", []), w + ".inner", first, last)))
        out.sort(key=lambda r: r.first)
        for a, b in zip(out, out[1:]):
            if b.first <= a.last:
                raise PlanError(f"{source}: field '{where}': regions {stages[a.first]}..{stages[a.last]} "
                                f"and {stages[b.first]}..{stages[b.last]} overlap")
        return tuple(out)

    top = regions(obj.get("checkpoints", []), "checkpoints", 0, len(stages) - 1)
    blocks = obj.get("edge_blocks", {})
    if not isinstance(blocks, dict):
        raise PlanError(f"{source}: field 'edge_blocks': expected an object {{STAGE: B}}")
    for stage, b in blocks.items():
        w = f"edge_blocks.{stage}"
        stage_index(stage, w)
        kind = "processor" if stage.startswith("processor.") else stage
        if kind not in EDGE_COUNT_FIELD:
            raise PlanError(f"{source}: field '{w}': stage {stage} has no edge update")
        edges = edge_counts[kind]
        if not isinstance(b, int) or isinstance(b, bool) or not 1 <= b <= edges:
            raise PlanError(f"{source}: field '{w}': expected an integer in 1..{edges}, got {b!r}")
    return Plan(stages, top, dict(blocks))


def load_plan(spec: str, model: GraphCast, edge_blocks: int | None = None) -> Plan:
    """spec: a built-in name or a plan JSON file. edge_blocks overrides the
    encoder and decoder block counts."""
    stages = model.stages()
    d = model.d
    if spec in ("none", "full", "deepmind") or spec.startswith("every:"):
        plan = builtin_plan(spec, stages, edge_blocks)
    else:
        with open(spec) as f:
            obj = json.load(f)
        plan = parse_plan(obj, stages, {k: getattr(d, v) for k, v in EDGE_COUNT_FIELD.items()}, spec)
        if edge_blocks is not None:
            plan.edge_blocks.update(encoder=edge_blocks, decoder=edge_blocks)
    edges = {"encoder": d.grid2mesh_edges, "decoder": d.mesh2grid_edges}
    for stage in ("encoder", "decoder"):
        if not 1 <= plan.blocks(stage) <= edges[stage]:
            raise PlanError(f"--edge-blocks: expected 1..{edges[stage]} for {stage}, got {plan.blocks(stage)}")
    return plan


# ---------------------------------------------------------------- running

def forward(model: GraphCast, plan: Plan, x: Inputs, tracer: Tracer | None = None) -> torch.Tensor:
    """The prediction of `model` on `x`, with the plan's checkpoints."""
    tracer = tracer or Tracer()
    latents = _run_range(model, plan, x, tracer, 0, len(plan.stages) - 1, plan.regions, {}, ("pred",), 0)
    return latents.pop("pred")


def _run_range(model, plan, x, tracer, first, last, regions, latents, keep, depth) -> dict:
    """Runs stages first..last, `depth` checkpoints deep, on `latents`
    (consumed) and returns the latents named in `keep`. A latent is dropped
    as soon as no later stage of the range reads it; a region returns only
    the latents needed after it."""
    starts = {r.first: r for r in regions}
    i = first
    while i <= last:
        r = starts.get(i)
        end = i if r is None else r.last
        needed = set(keep).union(*(stage_reads(s) for s in plan.stages[end + 1:last + 1]))
        reads, writes = range_io(plan.stages, i, end)
        if r is None:
            stage = plan.stages[i]
            stage_latents = {n: latents.pop(n) for n in reads}
            with tracer.stage(stage):
                out = model.run_stage(stage, stage_latents, x, plan.blocks(stage),
                                      partial(_checkpoint_block, tracer, stage, depth > 0))
            tracer.stage_done(stage, out)
            latents.update(out)
            del out
        else:
            outs = sorted(writes & needed)
            fn = tracer.checkpointed(partial(_region_fn, model, plan, x, tracer, r, reads, outs, depth + 1),
                                     plan.stages[r.first])
            latents.update(zip(outs, checkpoint(fn, *[latents.pop(n) for n in reads], nested=depth > 0,
                                                context_fn=plan.context_fn)))
        for n in [n for n in latents if n not in needed]:
            del latents[n]
        i = end + 1
    return latents


def _region_fn(model, plan, x, tracer, region, reads, outs, depth, *args):
    latents = dict(zip(reads, args))
    del args
    out = _run_range(model, plan, x, tracer, region.first, region.last, region.inner, latents, outs, depth)
    return tuple(out[n] for n in outs)


def _checkpoint_block(tracer, stage, nested, fn, *args):
    return checkpoint(tracer.checkpointed(fn, stage), *args, nested=nested)

#!/usr/bin/python3
"""Measures one training step (forward, MSE loss, backward) of the reference
GraphCast under a plan, and prints the memory figures of actmem's report
(docs/cost-model.md §2):

  activation_bytes_after_forward  live bytes once forward and loss are done
      (only `loss` referenced) minus live bytes just before the forward pass.
      Parameters and inputs exist before, so they are excluded; each storage
      is counted once because these are allocator bytes.
  peak_dynamic_bytes  the peak, over every op of forward + backward
      (recomputation included), of live bytes above that same level;
      parameter gradients start as None, so they count.

Bytes come from glibc (mallinfo.py) and are sampled after every op (op_meter.py).
Non-tensor overhead (autograd nodes, tensor structs, malloc headers) is
removed per op: the same step runs on two tiny models with every width 1 and
every count n and 2n; their tensor payload doubles while the overhead stays,
so overhead(op) = 2 * live_n(op) - live_2n(op). The raw and overhead figures
are in the output too.

usage: /usr/bin/python3 measure.py --model model.json --plan plan.json|none|full|every:K|deepmind
                                   [--edge-blocks N] [--batch B] [--seed S] [--timeline out.csv]
"""
from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
from functools import partial

from mallinfo import ensure_malloc_env, live_bytes


def parse_args(argv):
    p = argparse.ArgumentParser(prog="measure.py", description="Activation and peak dynamic bytes of one "
                                "training step of the reference GraphCast under a plan (see the module doc).")
    p.add_argument("--model", required=True, help="model description JSON (explicit counts)")
    p.add_argument("--plan", default="none", help="plan JSON file, or none | full | every:K | deepmind")
    p.add_argument("--edge-blocks", type=int, default=None,
                   help="edge blocks for the encoder and decoder (deepmind default: 4)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeline", help="write one CSV row per op here")
    p.add_argument("--selective", metavar="POLICY",
                   help="selective activation checkpointing in the plan's regions (torch >= 2.4): "
                        "mm = keep the matmuls' outputs, recompute the rest")
    p.add_argument("--autocast", choices=["bfloat16"],
                   help="run forward and loss under torch.autocast('cpu', dtype=torch.bfloat16) (torch >= 2); "
                        "backward runs after leaving it, as in an AMP training step")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    ensure_malloc_env()
    import torch
    from graphcast_reference import Description, GraphCast, make_inputs
    from plan import load_plan, selective_context

    torch.set_num_threads(1)
    try:
        desc = Description.load(args.model)
        torch.manual_seed(args.seed)
        model = GraphCast(desc)
        plan = load_plan(args.plan, model, args.edge_blocks)
        if args.selective:
            plan.context_fn = selective_context(args.selective)
    except (OSError, ValueError) as err:  # PlanError is a ValueError
        print(f"measure.py: error: {err}", file=sys.stderr)
        return 2
    if args.batch < 1:
        print("measure.py: error: --batch: expected a positive integer", file=sys.stderr)
        return 2

    x = make_inputs(desc, args.batch, args.seed)
    real = _measure(model, plan, x, record=True, autocast=args.autocast)
    n = 16 * -(-max([1, *plan.edge_blocks.values()]) // 16)
    units = []
    for count in (n, 2 * n):
        d = _unit_description(desc, count)
        units.append(_measure(GraphCast(d), plan, make_inputs(d, args.batch, args.seed), record=True,
                              autocast=args.autocast))
    report = _report(args, desc, model, plan, x, real, units)
    if args.timeline:
        _write_timeline(args.timeline, real, report["_overhead_rows"])
    del report["_overhead_rows"]
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


def _unit_description(d, count: int):
    widths = ("latent_size", "grid_input_features", "mesh_input_features", "edge_features", "output_features")
    counts = ("grid_nodes", "mesh_nodes", "grid2mesh_edges", "mesh_edges", "mesh2grid_edges")
    return dataclasses.replace(d, **{f: 1 for f in widths}, **{f: count for f in counts})


class _MeterTracer:
    """Labels ops with their stage: forward and recompute ops by the stage
    running; backward ops by the stage whose autograd node runs (prehooks set
    by label_backward); checkpointed functions run in backward as recompute."""

    def __init__(self, meter):
        self.meter = meter
        self.marks = []  # (stage, grad_fns of its outputs), forward order

    def stage(self, name):
        return self.meter.labelled(stage=name)

    def stage_done(self, name, outputs):
        if self.meter.phase == "forward":
            self.marks.append((name, [t.grad_fn for t in outputs.values() if t.grad_fn is not None]))

    def label_backward(self):
        """Gives each autograd node the first stage (in forward order) whose
        outputs reach it; its prehook sets that label when it runs."""
        seen, nodes = set(), []
        for name, roots in self.marks:
            stack = list(roots)
            while stack:
                node = stack.pop()
                if node is None or id(node) in seen:
                    continue
                seen.add(id(node))
                nodes.append(node)  # keeps ids unique while walking
                node.register_prehook(partial(_set_stage, self.meter, name))
                stack.extend(f for f, _ in node.next_functions)
        self.marks = []

    def checkpointed(self, fn, stage):
        meter = self.meter

        def run(*args):
            if meter.phase == "forward":
                return fn(*args)
            with meter.labelled(phase="recompute", stage=stage):
                return fn(*args)
        return run


def _set_stage(meter, name, grad_outputs):
    meter.stage = name


def _measure(model, plan, x, record: bool, autocast: str | None = None) -> dict:
    """One warm-up step, then one measured step. Figures are bytes above the
    level just before the measured forward pass. autocast="bfloat16": forward
    and loss run under CPU autocast; after_forward is taken after leaving it
    (its weight-cast cache is freed then)."""
    import contextlib

    import torch
    from graphcast_reference import loss_fn
    from op_meter import OpMeter
    from plan import forward

    for measured in (False, True):
        model.zero_grad(set_to_none=True)
        meter = OpMeter(0, record=record and measured)
        gc.collect()
        meter.base = base = live_bytes()
        with meter:
            tracer = _MeterTracer(meter)
            with (torch.autocast("cpu", dtype=torch.bfloat16) if autocast else contextlib.nullcontext()):
                pred = forward(model, plan, x, tracer)
                with meter.labelled(stage="loss"):
                    loss = loss_fn(pred, x.target)
                del pred
            after_forward = live_bytes() - base
            forward_ops = meter.count
            tracer.stage_done("loss", {"loss": loss})
            tracer.label_backward()  # its small allocations count from here on (calibrated away)
            with meter.labelled(phase="backward", stage="loss"):
                loss.backward()
            del loss, tracer
        after_backward = live_bytes() - base
    return {"after_forward": after_forward, "after_backward": after_backward, "forward_ops": forward_ops,
            "rows": meter.recorded()}


# The one op by which a step and its width-1 copies may differ and still be
# the same sequence: AccumulateGrad clones a parameter's gradient to the
# parameter's strides when they differ (PhysicsNeMo's concat_trick weights
# are column slices of one [H, 3L] weight: non-contiguous) and only detaches
# it when they agree, as they always do at width 1. Both allocate no more
# than one parameter gradient, which the payload of the step counts.
_GRADIENT_LAYOUT_OPS = frozenset({"aten.clone.default", "aten.detach.default"})


def _same_op(real_op, unit_op, phase: str) -> bool:
    if real_op == unit_op:
        return True
    return phase == "backward" and {str(real_op), str(unit_op)} <= _GRADIENT_LAYOUT_OPS


def subtract_overhead(real: dict, units) -> dict:
    """Removes the per-op non-tensor overhead from a measured step.

    `real` and the two `units` (the same step with every width 1 and every
    count n, then 2n) are _measure()-style dicts: "rows" (op, phase, stage,
    live bytes), "after_forward", "after_backward". When the three ran the
    same op sequence (up to _same_op), overhead(op) = 2 * live_n(op) -
    live_2n(op) (the payload doubles, the overhead stays); otherwise nothing
    is removed and "calibrated" is False. Returns "calibrated", "overhead" (per op),
    "live" (per op, overhead removed), and "after_forward" and
    "after_backward": the overhead at those two points.
    """
    rows, (u1, u2) = real["rows"], units
    calibrated = len(u1["rows"]) == len(rows) == len(u2["rows"]) and all(
        _same_op(a[0], b[0], a[1]) and b[0] == c[0] for a, b, c in zip(rows, u1["rows"], u2["rows"]))
    if calibrated:
        overhead = [2 * a[3] - b[3] for a, b in zip(u1["rows"], u2["rows"])]
        over_af = 2 * u1["after_forward"] - u2["after_forward"]
        over_ab = 2 * u1["after_backward"] - u2["after_backward"]
    else:
        overhead, over_af, over_ab = [0] * len(rows), 0, 0
    return {"calibrated": calibrated, "overhead": overhead, "live": [r[3] - o for r, o in zip(rows, overhead)],
            "after_forward": over_af, "after_backward": over_ab}


def _report(args, desc, model, plan, x, real, units) -> dict:
    rows = real["rows"]
    cal = subtract_overhead(real, units)
    calibrated, overhead, live = cal["calibrated"], cal["overhead"], cal["live"]
    over_af, over_ab = cal["after_forward"], cal["after_backward"]
    peak_i = max(range(len(live)), key=live.__getitem__)
    nf = real["forward_ops"]
    phases = [r[1] for r in rows]
    return {
        "model": dataclasses.asdict(desc),
        "plan": args.plan,
        "edge_blocks": plan.edge_blocks,
        "batch": args.batch,
        "autocast": args.autocast,
        "selective": args.selective,
        "activation_bytes_after_forward": real["after_forward"] - over_af,
        "peak_dynamic_bytes": max(live[peak_i], real["after_forward"] - over_af),
        "peak_at": {"op_index": peak_i, "op": str(rows[peak_i][0]), "phase": rows[peak_i][1],
                    "stage": rows[peak_i][2]},
        "forward_peak_bytes": max(live[:nf], default=0),
        "bytes_after_backward": real["after_backward"] - over_ab,
        "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
        "input_bytes": sum(t.numel() * t.element_size() for t in x.tensors()),
        "ops": {p: phases.count(p) for p in ("forward", "backward", "recompute")},
        "calibrated": calibrated,
        "raw": {"activation_bytes_after_forward": real["after_forward"],
                "peak_dynamic_bytes": max(r[3] for r in rows)},
        "overhead": {"activation_bytes_after_forward": over_af, "at_peak": overhead[peak_i],
                     "after_backward": over_ab},
        "_overhead_rows": overhead,
    }


def _write_timeline(path, real, overhead):
    with open(path, "w") as f:
        f.write("index,op,phase,stage,live_bytes,raw_live_bytes\n")
        for i, ((op, phase, stage, raw), o) in enumerate(zip(real["rows"], overhead)):
            f.write(f"{i},{op},{phase},{stage},{raw - o},{raw}\n")


if __name__ == "__main__":
    sys.exit(main())

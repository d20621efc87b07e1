#!/usr/bin/env python3
"""actmem-jax scan_residuals: what JAX's scanned rollout stacks for the backward loop.

A rollout runs as `jax.lax.scan`. Differentiating it, JAX splits the loop:
a forward scan that also returns, stacked over the steps, every value the
backward needs (its residuals), and a reverse scan that reads them. Which
values those are is JAX's choice (its partial evaluation of the loop body:
everything outside a `jax.checkpoint` that a derivative reads, in the dtype
the jaxpr has it), made before XLA sees the program, so XLA cannot fuse them
away: its loop keeps them as stacked buffers. This traces the training step
(nothing is compiled; seconds even at GraphCast's size) and lists each
forward scan's stacked outputs by dtype and per-step shape, with their total.
Under each step's checkpoint (`--step-checkpoint`) the stack holds only each
step's carry; without it, the residuals of every op outside a checkpoint
(docs/journal.md J11). Residuals that do not depend on the step (those of
ops that read only parameters and the graph's constant features) are not
stacked: JAX hoists them out of the loop, computed once, and hands them to
the backward scan as loop constants; they are listed apart ("hoisted").

Usage:
  scan_residuals.py [judge.py arguments] [--json]
Exit: 0, or 2 with `actmem-jax: error: ...` on bad input.
"""
from __future__ import annotations

import collections
import json
import sys

import judge


def parse_args(argv: list[str]):
    json_output = "--json" in argv
    return judge.parse_args([a for a in argv if a != "--json"] + ["--target", "cpu"]), json_output


def sub_jaxprs(equation):
    """The jaxprs an equation's parameters hold (a scan's body, a checkpoint's, a jit's)."""
    for value in equation.params.values():
        for x in value if isinstance(value, (list, tuple)) else [value]:
            inner = getattr(x, "jaxpr", x)
            if hasattr(inner, "eqns"):
                yield inner


def forward_scans(jaxpr):
    """Every scan that runs forward, in the order the step runs them, nested ones included."""
    for equation in jaxpr.eqns:
        if equation.primitive.name == "scan" and not equation.params["reverse"]:
            yield equation
        for inner in sub_jaxprs(equation):
            yield from forward_scans(inner)


def backward_scans(jaxpr):
    """Every scan that runs in reverse (a rollout's backward loop), in order."""
    for equation in jaxpr.eqns:
        if equation.primitive.name == "scan" and equation.params["reverse"]:
            yield equation
        for inner in sub_jaxprs(equation):
            yield from backward_scans(inner)


def producers(jaxpr, out=None) -> dict:
    """The equation that makes each variable (by id), nested jaxprs included."""
    out = {} if out is None else out
    for equation in jaxpr.eqns:
        for var in equation.outvars:
            out[id(var)] = equation
        for inner in sub_jaxprs(equation):
            producers(inner, out)
    return out


def summary(avals, leading_axis: bool) -> dict:
    """Count and bytes per (dtype, shape), the leading (steps) axis dropped when `leading_axis`."""
    groups: dict[tuple[str, tuple[int, ...]], list[int]] = collections.defaultdict(lambda: [0, 0])
    for aval in avals:
        group = groups[(str(aval.dtype), tuple(aval.shape[1:] if leading_axis else aval.shape))]
        group[0] += 1
        group[1] += aval.size * aval.dtype.itemsize
    rows = [{"dtype": dtype, "shape": list(shape), "count": count, "bytes": size}
            for (dtype, shape), (count, size) in sorted(groups.items(), key=lambda kv: -kv[1][1])]
    return {"outputs": sum(r["count"] for r in rows), "bytes": sum(r["bytes"] for r in rows), "by_shape": rows}


def stacked_outputs(scan) -> dict:
    """A forward scan's stacked outputs (after its carry), per (dtype, per-step shape)."""
    return {"length": scan.params["length"],
            **summary([var.aval for var in scan.outvars[scan.params["num_carry"]:]], leading_axis=True)}


def hoisted_residuals(scan, made_by: dict) -> dict:
    """A backward scan's loop constants that the step computes: the residuals
    JAX hoisted out of the loop. Not the step's arguments, nor casts and
    broadcasts of them (the parameters' copies in the activation dtype,
    which the forward scan reads too, the LayerNorm scales' broadcasts, and
    the graph's constant features broadcast to the batch and cast)."""
    def copy_of_argument(var) -> bool:
        equation = made_by.get(id(var))
        return equation is None or (
            equation.primitive.name in ("convert_element_type", "broadcast_in_dim")
            and all(copy_of_argument(v) for v in equation.invars if hasattr(v, "aval")))

    def computed(var) -> bool:
        return id(var) in made_by and not copy_of_argument(var)
    return summary([var.aval for var in scan.invars[:scan.params["num_consts"]] if computed(var)], leading_axis=False)


def scans(case) -> list[dict]:
    import jax  # judge.py set JAX's environment when it was imported

    step = judge.make_train_step(case.description, case.run, judge.network(case.plan), case.plan.step_checkpoint)
    traced = jax.make_jaxpr(step)(*judge.argument_shapes(case.description, case.run))  # already ShapeDtypeStructs
    made_by = producers(traced.jaxpr)
    # The i-th forward scan and the i-th backward one are one loop's two halves.
    return [{**stacked_outputs(f), "hoisted": hoisted_residuals(b, made_by)}
            for f, b in zip(forward_scans(traced.jaxpr), backward_scans(traced.jaxpr))]


def report(found: list[dict]) -> str:
    if not found:
        return "no forward scan (a rollout of one step runs no loop)"
    lines = []
    for s in found:
        lines.append(f"forward scan of {s['length']} steps: {s['outputs']} stacked outputs, {s['bytes'] / 2**30:.3f} GiB")
        for r in s["by_shape"]:
            lines.append(f"  {r['count']:4d} x {r['dtype']}{r['shape']}  {r['bytes'] / 2**30:.3f} GiB")
        h = s["hoisted"]
        lines.append(f"hoisted out of the loop, once: {h['outputs']} residuals, {h['bytes'] / 2**30:.3f} GiB")
        for r in h["by_shape"]:
            lines.append(f"  {r['count']:4d} x {r['dtype']}{r['shape']}  {r['bytes'] / 2**30:.3f} GiB")
    return "\n".join(lines)


def main(argv=None) -> int:
    try:
        args, json_output = parse_args(sys.argv[1:] if argv is None else argv)
        judge.require_packages(args.targets)
        judge.require_targets_on_device(args, "scan_residuals.py")
        args.no_actmem = True  # the stack is JAX's; actmem's prediction is not needed for it
        case = judge.make_case(args)
        judge.require_plan_on_device(case, "scan_residuals.py")
        found = scans(case)
    except (judge.UsageError, judge.InputError) as e:
        print(f"actmem-jax: error: {e}", file=sys.stderr)
        return 2
    print(json.dumps(found) if json_output else report(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""actmem-jax gpu_check: XLA:GPU's own memory figures for one training step
of the reference JAX GraphCast under an actmem plan, compiled and run on the
local GPU.

The step is judge.py's (jitted whole, parameters and optimizer state
donated), with real random arguments on the GPU. It prints one JSON object:
compiled.memory_analysis() (argument, output, alias, temp; peak = temp +
argument + output - alias) and the allocator's peak over the run
(device.memory_stats()["peak_bytes_in_use"], with "bytes_in_use" before the
step: the arguments). One case per process, since that peak only grows.

Usage:
  gpu_check.py --plan FILE [--model NAME|FILE] [--dtype D] [--batch B] [--rollout T] [--step-checkpoint]
               [--platform cuda|cpu]
Exit: 0 measured, 2 bad input.
"""
from __future__ import annotations

import json
import os
import sys
import time

PLATFORM = "cpu" if "--platform" in sys.argv and sys.argv[sys.argv.index("--platform") + 1:][:1] == ["cpu"] else "cuda"
os.environ["JAX_PLATFORMS"] = PLATFORM  # before judge, which otherwise pins the CPU backend
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the allocator's peak is the step's

import judge  # noqa: E402  (after the platform is chosen)


def main(argv: list[str]) -> int:
    if "--platform" in argv:
        i = argv.index("--platform")
        argv = argv[:i] + argv[i + 2:]
    try:
        args = judge.parse_args(argv + ["--no-actmem", "--target", "cpu"])
        if not args.plan:
            raise judge.UsageError("--plan FILE is required (make it with `actmem plan` or `actmem simulate`)")
        judge.require_packages(["cpu"])
        judge.require_targets_on_device(args, "gpu_check.py")
        case = judge.make_case(args)
        judge.require_plan_on_device(case, "gpu_check.py")
    except (judge.UsageError, judge.InputError) as e:
        print(f"actmem-jax: error: {e}", file=sys.stderr)
        return 2
    import jax
    from graphcast_jax import DONATED, make_train_step, random_arguments
    from plan import network

    device = jax.devices()[0]
    step = make_train_step(case.description, case.run, network(case.plan), case.plan.step_checkpoint)
    arguments = jax.block_until_ready(random_arguments(case.description, case.run))
    start = time.perf_counter()
    compiled = jax.jit(step, donate_argnums=DONATED).lower(*arguments).compile()
    compiled_at = time.perf_counter()
    stats = device.memory_stats() or {}
    before = stats.get("bytes_in_use")
    out = jax.block_until_ready(compiled(*arguments))
    ran_at = time.perf_counter()
    stats = device.memory_stats() or {}
    result = {"platform": PLATFORM, "device": device.device_kind, "jax": jax.__version__,
              "model": case.model_name, "plan": args.plan, "dtype": case.run.dtype, "batch": case.run.batch,
              "rollout": case.run.rollout, "step_checkpoint": case.plan.step_checkpoint,
              "compile_seconds": round(compiled_at - start, 2), "run_seconds": round(ran_at - compiled_at, 3),
              "loss": float(out[2]), "bytes_in_use_before": before,
              "peak_bytes_in_use": stats.get("peak_bytes_in_use"), "bytes_limit": stats.get("bytes_limit")}
    result.update(judge.memory_fields(compiled.memory_analysis()))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

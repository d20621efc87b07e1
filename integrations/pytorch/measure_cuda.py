#!/usr/bin/env python3
"""Measures one training step (forward, MSE loss, backward) of the reference
GraphCast on a CUDA GPU with PyTorch's caching allocator's own statistics,
for every case of validate.py's CUDA_CASES (docs/validation.md, "On a GPU").

A case's precision is float32, bfloat16 (torch.autocast to bfloat16 around
forward and loss, parameters and inputs float32) or bfloat16-model (the
model's parameters and its inputs cast to bfloat16, no autocast). Per
case, after one warm-up step (which allocates cuBLAS's workspaces, so
they sit in the base like the parameters and inputs):

  activation_bytes_after_forward  torch.cuda.memory_allocated() once forward
      and loss are done (only `loss` referenced), minus the same just before
      the forward pass.
  peak_dynamic_bytes  torch.cuda.max_memory_allocated() over forward and
      backward (peak statistics reset just before the forward pass), minus
      that same base; parameter gradients start as None, so they count.

These are measure.py's two figures, read from the allocator instead of
glibc: every byte any op allocates counts, inside ops too, each block
rounded up to the allocator's 512 bytes. One JSON line per case goes to
standard output: the case's key (model, plan, batch, autocast), the two
figures, and the allocator's reserved peak.

usage: python3 measure_cuda.py [--only SUBSTRING] [--device cuda]
       (--device cpu runs the same steps on the CPU with zero figures: a dry run of the script)
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
import time

import torch

from graphcast_reference import Description, GraphCast, loss_fn, make_inputs
from plan import EDGE_COUNT_FIELD, forward, parse_plan
from validate import CUDA_CASES, case_key, model_json, plans


def measure(model: GraphCast, plan, x, device: torch.device, autocast: str | None) -> dict:
    cuda = device.type == "cuda"
    for measured in (False, True):
        model.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize(device)
            base = torch.cuda.memory_allocated(device)
            torch.cuda.reset_peak_memory_stats(device)
        with (torch.autocast(device.type, dtype=torch.bfloat16) if autocast == "bfloat16"
              else contextlib.nullcontext()):
            pred = forward(model, plan, x)
            loss = loss_fn(pred, x.target)
            del pred
        if cuda:
            torch.cuda.synchronize(device)
            after_forward = torch.cuda.memory_allocated(device) - base
        loss.backward()
        del loss
        if cuda:
            torch.cuda.synchronize(device)
            peak = torch.cuda.max_memory_allocated(device) - base
            reserved = torch.cuda.max_memory_reserved(device)
    if not cuda:
        return {"activation_bytes_after_forward": 0, "peak_dynamic_bytes": 0, "peak_reserved_bytes": 0}
    return {"activation_bytes_after_forward": after_forward, "peak_dynamic_bytes": peak,
            "peak_reserved_bytes": reserved, "base_bytes": base}


def map_tensors(x, fn):
    """The inputs with fn applied to every tensor (the index pairs' too)."""
    return dataclasses.replace(x, **{f.name: (tuple(fn(t) for t in v) if isinstance(v, tuple) else fn(v))
                                     for f in dataclasses.fields(x) for v in [getattr(x, f.name)]})


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="measure_cuda.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="run the cases whose key contains this")
    p.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    args = p.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("measure_cuda.py: error: torch sees no CUDA device", file=sys.stderr)
        return 2
    for model_name, plan_name, batch, autocast in CUDA_CASES:
        key = case_key(model_name, plan_name, batch, autocast)
        if args.only not in key:
            continue
        description = Description.from_json(model_json(model_name), model_name)
        torch.manual_seed(0)
        model = GraphCast(description).to(device)
        plan = parse_plan(plans(description.processor_steps)[plan_name], model.stages(),
                          {k: getattr(description, v) for k, v in EDGE_COUNT_FIELD.items()}, key)
        x = map_tensors(make_inputs(description, batch), lambda t: t.to(device))
        if autocast == "bfloat16-model":  # the whole model in bfloat16, features and targets too: no autocast
            model = model.to(torch.bfloat16)
            x = map_tensors(x, lambda t: t.to(torch.bfloat16) if t.is_floating_point() else t)
        start = time.perf_counter()
        figures = measure(model, plan, x, device, autocast)
        print(json.dumps({"case": key, "model": model_name, "plan": plan_name, "batch": batch,
                          "autocast": autocast, "torch": torch.__version__,
                          "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                          "seconds": round(time.perf_counter() - start, 3), **figures}), flush=True)
        del model, x
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())

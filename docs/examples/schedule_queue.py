#!/usr/bin/env python3
"""A queue of training jobs onto a pool of devices, with `pip install actmem`.

Each job, in queue order, gets the cheapest device type that still has a
free chip on which one training step fits, the largest per-device batch
that fits there, and its plan file, written for the trainer to apply
(docs/plan-format.md). "Cheapest" is the least memory, a stand-in for a
price list; a job that fits nowhere free waits.

    python -m venv v && v/bin/pip install .      # from a clone (docs/api.md)
    v/bin/python docs/examples/schedule_queue.py PLAN_FOLDER
"""
import json
import pathlib
import sys

import actmem

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from choose_device import largest_batch  # noqa: E402  (the binary search on the batch)

POOL = {"tpu-v5e": 2, "rtx4090-24gb": 1, "tpu-v4": 2, "a100-80gb": 1}
QUEUE = [
    {"name": "small-jax", "model": "graphcast-small", "framework": "jax", "rollout": 1},
    {"name": "small-torch-4", "model": "graphcast-small", "framework": "pytorch", "rollout": 4},
    {"name": "graphcast-jax", "model": "graphcast", "framework": "jax", "rollout": 1},
    {"name": "graphcast-jax-2", "model": "graphcast", "framework": "jax", "rollout": 1},
    {"name": "graphcast-torch-4", "model": "graphcast", "framework": "pytorch", "rollout": 4},
    {"name": "graphcast-jax-3", "model": "graphcast", "framework": "jax", "rollout": 1},
]
MAX_BATCH = 8


def place(job: dict, free: dict):
    """The cheapest free device type where the job fits, with its largest batch."""
    memory = {d["id"]: d["memory_bytes"] for d in actmem.devices()}
    for device in sorted((d for d, n in free.items() if n > 0), key=memory.get):
        found = largest_batch(job, device, MAX_BATCH)
        if found:
            return device, found[0]
    return None


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    free = dict(POOL)
    for job in QUEUE:
        placed = place(job, free)
        if placed is None:
            print(f"{job['name']}: waits (no free device fits it)")
            continue
        device, batch = placed
        free[device] -= 1
        run = {k: job[k] for k in ("model", "framework", "rollout")}
        document = actmem.plan(device=device, batch=batch, **run)
        path = out / f"{job['name']}.plan.json"
        path.write_text(json.dumps(document, indent=2) + "\n")
        p = document["predicted"]
        print(f"{job['name']}: {device}, batch {batch}, peak {p['peak_bytes'] / 2**30:.2f} GiB, "
              f"recompute +{100 * p['recompute_overhead']:.0f}% -> {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""A scheduler in Python: for each job, the cheapest catalog device on which
one training step fits, and the largest per-device batch that fits there.

"Cheapest" is the least device memory, a stand-in for a price list. Jobs are
evaluated from a thread pool: actmem releases the GIL while it plans.

    PYTHONPATH=build/python/package /usr/bin/python3 docs/examples/choose_device.py [max_batch [model ...]]

(default: 8 graphcast-small graphcast)
"""
import sys
from concurrent.futures import ThreadPoolExecutor

import actmem



def jobs_for(models: list[str]) -> list[dict]:
    """Each model trained two ways."""
    return [job for m in models for job in (
        {"name": f"{m}, JAX, 1 step", "model": m, "framework": "jax", "rollout": 1},
        {"name": f"{m}, PyTorch, 4 steps", "model": m, "framework": "pytorch", "rollout": 4})]


def largest_batch(job: dict, device: str, max_batch: int):
    """The largest batch in 1..max_batch that fits (fitting is monotone in
    the batch) and its answer, or None if batch 1 does not fit."""
    run = {k: job[k] for k in ("model", "framework", "rollout")}
    answer = actmem.fits(device=device, batch=1, **run)
    if not answer["fits"]:
        return None
    best, low, high = (1, answer), 1, max_batch + 1
    while high - low > 1:
        mid = (low + high) // 2
        answer = actmem.fits(device=device, batch=mid, **run)
        if answer["fits"]:
            low, best = mid, (mid, answer)
        else:
            high = mid
    return best


def choose(job: dict, max_batch: int):
    for device in sorted(actmem.devices(), key=lambda d: d["memory_bytes"]):
        found = largest_batch(job, device["id"], max_batch)
        if found:
            return device["id"], *found
    return None


def main() -> int:
    max_batch = max(1, int(sys.argv[1])) if len(sys.argv) > 1 else 8
    jobs = jobs_for(sys.argv[2:] or ["graphcast-small", "graphcast"])
    with ThreadPoolExecutor() as pool:
        choices = list(pool.map(lambda job: choose(job, max_batch), jobs))
    for job, choice in zip(jobs, choices):
        if choice is None:
            print(f"{job['name']}: no catalog device fits even batch 1")
            continue
        device, batch, answer = choice
        print(f"{job['name']}: {device}, batch {batch} (peak {answer['peak_bytes'] / 2**30:.2f} GiB, "
              f"plan: {answer['description']})")
    return 0 if all(choices) else 1


if __name__ == "__main__":
    sys.exit(main())

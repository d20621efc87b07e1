#!/usr/bin/env python3
"""actmem-jax gpu_table: actmem's predictions beside XLA:GPU's figures from
device_check.sh, as a Markdown table (docs/validation-jax.md, "On a GPU").

For each measured case, actmem simulates the same model, run and plan for
the device (`actmem simulate --framework jax --device DEVICE --json`); its
program is peak_bytes less the device reserve (what the allocator and XLA
count: the arguments, the step's temporaries and outputs).

Usage: gpu_table.py RESULTS.jsonl PLAN_DIR [--device h200-141gb]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ACTMEM = os.environ.get("ACTMEM_BIN", os.path.join(os.path.dirname(os.path.dirname(HERE)), "build", "cli", "actmem"))
GIB = 2**30


def predict(case: dict, plan_dir: str, device: str) -> dict:
    model = case["model"]
    local = os.path.join(HERE, "models", model + ".json")
    command = [ACTMEM, "simulate", "--json", "--framework", "jax", "--device", device,
               "--model", local if os.path.isfile(local) else model,
               "--plan", os.path.join(plan_dir, case["case"] + ".plan.json"),
               "--dtype", case["dtype"], "--batch", str(case["batch"]), "--rollout", str(case["rollout"])]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"actmem-jax: error: {case['case']}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def row(case: dict, report: dict) -> str:
    program = report["peak_bytes"] - report["breakdown"]["reserved"]
    cells = [f"{program / GIB:.2f}"]
    for measured in (case["peak_bytes"], case["peak_bytes_in_use"]):  # None: XLA:CPU, no allocator statistics
        cells += ["-", "-"] if measured is None else [f"{measured / GIB:.2f}",
                                                      f"{100 * (program - measured) / measured:+.1f}%"]
    return f"| {case['case']} | {' | '.join(cells)} |"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="gpu_table.py", description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("plan_dir")
    p.add_argument("--device", default="h200-141gb")
    args = p.parse_args(argv)
    print("| case | actmem (GiB) | XLA:GPU memory_analysis (GiB) | error | allocator peak (GiB) | error |")
    print("|---|---:|---:|---:|---:|---:|")
    with open(args.results) as f:
        for line in f:
            case = json.loads(line)
            if "error" in case:
                print(f"| {case['case']} | | | | | failed: {case['error'].strip().splitlines()[-1][:120]} |")
                continue
            print(row(case, predict(case, args.plan_dir, args.device)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

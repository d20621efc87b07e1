"""Predicted vs measured: actmem's simulator against the reference PyTorch GraphCast.

For every case of a fixed matrix (models of several widths, node/edge counts
and depths; plans none, full, every:2, deepmind, nested regions and edge
blocks 1/3/7; batch 1 and 2) this writes one plan file, runs

    actmem simulate --model M --plan P --framework pytorch --dtype float32 --json
    measure.py --model M --plan P          (torch 1.13 on CPU, mallinfo2)

and compares `activation_bytes_after_forward` (must be within 3%) and
`peak_dynamic_bytes` (within 10%). Prints the table (Markdown); exits 1 if any
case is out of tolerance, 77 (skip) if torch is missing and
ACTMEM_REQUIRE_TORCH is not set.

    /usr/bin/python3 integrations/pytorch/validate.py --actmem build/cli/actmem [--markdown out.md]

With --autocast bfloat16 (torch >= 2, e.g. ~/.cache/actmem/venv-torch/bin/python)
it runs its own cases (AUTOCAST_CASES) with measure.py --autocast bfloat16
against actmem's --dtype bfloat16 --autocast cpu.

With --cuda-results FILE it measures nothing and needs no torch: it compares
actmem with the JSON lines measure_cuda.py wrote on a CUDA GPU (CUDA_CASES;
bfloat16 there is CUDA's autocast, actmem's --autocast cuda), and fails on a
case out of tolerance that KNOWN_CUDA_MISSES does not list, or one it lists
that is back within.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
AFTER_FORWARD_TOLERANCE = 0.03
PEAK_TOLERANCE = 0.10

MODELS = {
    "A": dict(grid_nodes=2000, mesh_nodes=500, grid2mesh_edges=3000, mesh_edges=3000, mesh2grid_edges=6000,
              latent_size=64, processor_steps=4, grid_input_features=20, mesh_input_features=20, output_features=10),
    "B": dict(grid_nodes=3000, mesh_nodes=800, grid2mesh_edges=5000, mesh_edges=6000, mesh2grid_edges=9000,
              latent_size=32, processor_steps=3, grid_input_features=12, mesh_input_features=12, output_features=6),
    "C": dict(grid_nodes=1000, mesh_nodes=300, grid2mesh_edges=2000, mesh_edges=1800, mesh2grid_edges=3000,
              latent_size=128, processor_steps=6, grid_input_features=30, mesh_input_features=30, output_features=16),
}


def stages(steps: int) -> list[str]:
    return ["encoder", "mesh_edge_embed", *[f"processor.{k}" for k in range(steps)], "decoder"]


def region(first: str, last: str, inner=None) -> dict:
    r = {"from": first, "to": last}
    if inner:
        r["inner"] = inner
    return r


def plans(steps: int) -> dict[str, dict]:
    s = stages(steps)
    proc = s[2:-1]
    every2 = [region(proc[i], proc[min(i + 1, len(proc) - 1)]) for i in range(0, len(proc), 2)]
    every3 = [region(proc[i], proc[min(i + 2, len(proc) - 1)]) for i in range(0, len(proc), 3)]
    return {
        "none": {"checkpoints": []},
        "full": {"checkpoints": [region(x, x) for x in s]},
        "every:2": {"checkpoints": every2},
        "deepmind": {"checkpoints": [region("encoder", "encoder"), *every3, region("decoder", "decoder")],
                     "edge_blocks": {"encoder": 4, "decoder": 4}},
        "blocks 3": {"checkpoints": [], "edge_blocks": {"encoder": 3, "processor.1": 3, "decoder": 3}},
        "blocks 7": {"checkpoints": [], "edge_blocks": {"encoder": 7, "processor.0": 7, "decoder": 7}},
        "blocks 1": {"checkpoints": [], "edge_blocks": {"encoder": 1, "decoder": 1}},
        "nested": {"checkpoints": [region(proc[0], proc[-1], [region(proc[0], proc[1])]), region("decoder", "decoder")],
                   "edge_blocks": {"decoder": 3}},
        "mixed": {"checkpoints": [region("encoder", "mesh_edge_embed", [region("encoder", "encoder")])],
                  "edge_blocks": {"encoder": 7, proc[-1]: 3}},
    }


CASES = [  # (model, plan, batch)
    *[("A", p, 1) for p in ("none", "full", "every:2", "deepmind", "blocks 3", "blocks 7", "blocks 1", "nested", "mixed")],
    *[("B", p, 1) for p in ("none", "full", "every:2", "deepmind", "blocks 7", "nested")],
    *[("C", p, 1) for p in ("none", "full", "every:2", "deepmind", "blocks 3", "mixed")],
    ("A", "deepmind", 2), ("B", "none", 2),
]
# --autocast bfloat16 (torch >= 2): the reference under CPU autocast.
AUTOCAST_CASES = [
    *[("A", p, 1) for p in ("none", "full", "every:2", "deepmind", "blocks 3", "nested")],
    *[("B", p, 1) for p in ("none", "deepmind")], ("C", "full", 1), ("A", "deepmind", 2),
]
# Models at full width, for measure_cuda.py on a GPU: GiBs of activations.
FILE_MODELS = {
    "mid": HERE.parent / "jax" / "models" / "mid.json",
    "graphcast-small": HERE.parent.parent / "models" / "presets" / "graphcast-small.json",
    "graphcast": HERE.parent.parent / "models" / "presets" / "graphcast.json",
}
# measure_cuda.py's cases (model, plan, batch, autocast): all of the above,
# then full-width models under the same plans, float32 and bfloat16, and
# GraphCast 0.25° where one H200 holds it (actmem: at most 66 GiB).
CUDA_CASES = [
    *[(m, p, b, None) for m, p, b in CASES],
    *[(m, p, b, "bfloat16") for m, p, b in AUTOCAST_CASES],
    *[(m, p, 1, a) for m in ("mid", "graphcast-small") for a in (None, "bfloat16")
      for p in ("none", "full", "every:2", "deepmind", "nested")],
    ("mid", "deepmind", 2, "bfloat16"),
    ("graphcast", "deepmind", 1, None), ("graphcast", "deepmind", 1, "bfloat16"), ("graphcast", "full", 1, "bfloat16"),
    # The whole model in bfloat16 (parameters and inputs cast, no autocast:
    # PhysicsNeMo's full_bf16).
    *[(m, p, b, "bfloat16-model") for m, p, b in AUTOCAST_CASES],
    *[(m, p, 1, "bfloat16-model") for m in ("mid", "graphcast-small") for p in ("none", "full", "deepmind")],
]


# Cases of the stored CUDA measurements outside the tolerances, and why: the
# table shows them; the check fails on any other, and on one of these back
# inside (docs/validation.md, "On a GPU").
KNOWN_CUDA_MISSES = {
    "A none b1 bfloat16": "after forward -3.0%: 1.2 MB of 39 MB not located (tiny model; full width within 0.8%)",
    "A every:2 b1 bfloat16": "after forward -3.8%: as 'A none'",
    "A blocks 3 b1 bfloat16": "after forward -3.3%: as 'A none'",
    "graphcast deepmind b1 bfloat16": "peak +15.0%, over (float32 +8.3%): GraphCast's edge blocks, not located "
                                      "without an op-level CUDA trace",
}


def case_key(model: str, plan: str, batch: int, autocast: str | None) -> str:
    return f"{model} {plan} b{batch} {autocast or 'float32'}"


def model_json(name: str) -> dict:
    if name in FILE_MODELS:
        return json.loads(FILE_MODELS[name].read_text())
    return {"name": f"validation-{name}", "architecture": "graphcast", "mlp_hidden_layers": 1, "edge_features": 4,
            **MODELS[name]}


def processor_steps(name: str) -> int:
    return model_json(name)["processor_steps"]


def run_json(command: list[str]) -> dict:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise SystemExit(f"validate: {' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return json.loads(done.stdout)


def relative(predicted: int, measured: int) -> float:
    return (predicted - measured) / measured


def predict(actmem: str, tmp: str, model_name: str, plan_name: str, batch: int, dtype: str,
            autocast: str = "cuda") -> tuple[dict, str, str]:
    """actmem's report for one case, and the model and plan files it read;
    `autocast`: whose autocast lists a bfloat16 step follows (actmem --autocast)."""
    model_path = Path(tmp) / f"{model_name}.json"
    model_path.write_text(json.dumps(model_json(model_name)))
    plan_path = Path(tmp) / "plan.json"
    plan_path.write_text(json.dumps(plans(processor_steps(model_name))[plan_name]))
    report = run_json([actmem, "simulate", "--model", str(model_path), "--plan", str(plan_path),
                       "--framework", "pytorch", "--dtype", dtype, "--autocast", autocast,
                       "--batch", str(batch), "--json"])
    return report, str(model_path), str(plan_path)


def compare(predicted: dict, measured: dict) -> tuple[bool, str]:
    """Within tolerance, and the table's figures and errors."""
    e_after = relative(predicted["activation_bytes_after_forward"], measured["activation_bytes_after_forward"])
    e_peak = relative(predicted["peak_dynamic_bytes"], measured["peak_dynamic_bytes"])
    ok = abs(e_after) <= AFTER_FORWARD_TOLERANCE and abs(e_peak) <= PEAK_TOLERANCE
    return ok, (f"{predicted['activation_bytes_after_forward']:,} | {measured['activation_bytes_after_forward']:,} | "
                f"{100 * e_after:+.2f}% | {predicted['peak_dynamic_bytes']:,} | {measured['peak_dynamic_bytes']:,} | "
                f"{100 * e_peak:+.2f}%{'' if ok else ' **FAIL**'}")


def cuda_table(actmem: str, results: str) -> tuple[list[str], int, int]:
    """measure_cuda.py's JSON lines beside actmem's predictions."""
    rows = ["| model | plan | batch | dtype | after forward: predicted | measured | error | "
            "peak dynamic: predicted | measured | error |", "|" + "---|" * 10]
    failures = cases = 0
    with open(results) as f, tempfile.TemporaryDirectory() as tmp:
        for line in f:
            measured = json.loads(line)
            dtype = "bfloat16" if measured["autocast"] else "float32"
            # actmem has no whole-model bfloat16 mode; CPU's lists (LayerNorm
            # in bfloat16, casts only where a linear reads float32) come closest.
            lists = "cpu" if measured["autocast"] == "bfloat16-model" else "cuda"
            predicted, _, _ = predict(actmem, tmp, measured["model"], measured["plan"], measured["batch"], dtype, lists)
            ok, cells = compare(predicted, measured)
            known = KNOWN_CUDA_MISSES.get(measured["case"])
            if lists == "cpu":  # not a mode actmem models: shown, not judged
                rows.append(f"| {measured['model']} | {measured['plan']} | {measured['batch']} | "
                            f"bfloat16 model (not judged) | {cells.replace(' **FAIL**', '')} |")
                print(rows[-1], flush=True)
                continue
            if known and ok:
                cells += " (listed as a known miss, now within: remove it from KNOWN_CUDA_MISSES)"
            elif known:
                cells += f" (known: {known})"
            cases, failures = cases + 1, failures + (ok == bool(known))
            rows.append(f"| {measured['model']} | {measured['plan']} | {measured['batch']} | "
                        f"{measured['autocast'] or 'float32'} | {cells} |")
            print(rows[-1], flush=True)
    return rows, cases, failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actmem", required=True, help="path of the actmem executable")
    parser.add_argument("--markdown", help="also write the table to this file")
    parser.add_argument("--autocast", choices=["bfloat16"],
                        help="measure under torch.autocast('cpu', dtype=torch.bfloat16) (torch >= 2; its own "
                             "cases) against actmem's --dtype bfloat16")
    parser.add_argument("--cuda-results", metavar="FILE",
                        help="measure nothing: compare actmem with measure_cuda.py's JSON lines in FILE")
    args = parser.parse_args(argv)
    if args.cuda_results:
        rows, count, failures = cuda_table(args.actmem, args.cuda_results)
        return finish(args, rows, count, failures)
    cases = AUTOCAST_CASES if args.autocast else CASES
    dtype = args.autocast or "float32"
    autocast = ["--autocast", args.autocast] if args.autocast else []
    try:
        import torch  # noqa: F401
    except ImportError:
        if os.environ.get("ACTMEM_REQUIRE_TORCH"):
            print("validate: python3-torch is required here (ACTMEM_REQUIRE_TORCH is set)", file=sys.stderr)
            return 1
        print("validate: skipped, python3-torch is not installed")
        return 77

    rows, failures = [], 0
    header = ("| model | plan | batch | after forward: predicted | measured | error | "
              "peak dynamic: predicted | measured | error | peak at (measured) |")
    rows.append(header)
    rows.append("|" + "---|" * 10)
    with tempfile.TemporaryDirectory() as tmp:
        for model_name, plan_name, batch in cases:
            predicted, model_path, plan_path = predict(args.actmem, tmp, model_name, plan_name, batch, dtype, "cpu")
            measured = run_json([sys.executable, str(HERE / "measure.py"), "--model", model_path,
                                 "--plan", plan_path, "--batch", str(batch), *autocast])
            ok, cells = compare(predicted, measured)
            failures += not ok
            at = measured.get("peak_at", {})
            rows.append(f"| {model_name} | {plan_name} | {batch} | {cells} | {at.get('phase', '?')} {at.get('stage', '?')} |")
            print(rows[-1], flush=True)
    return finish(args, rows, len(cases), failures)


def finish(args, rows: list[str], count: int, failures: int) -> int:
    if args.markdown:
        Path(args.markdown).write_text("\n".join(rows) + "\n")
    print(f"\n{count - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

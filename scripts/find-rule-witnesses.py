#!/usr/bin/env python3
"""Finds, for each memory rule (`actmem rules`), a small run whose prediction
changes when the rule is switched off: its witness, which tests/rules_test.cpp
checks and docs/rules/ shows.

Runs a grid of small cases (the tiny test model in each implementation and
graphcast-small with 4 processor steps; both frameworks, both dtypes, batch 1
and 2, rollout 1 to 3; built-in plans and plan files with step checkpoints,
host offload, edge blocks and nested regions; and the solver's least peak)
with every rule on, then with each rule off, and picks for each rule the
smallest case where a figure differs: the peak, else the forward pass's peak,
what is held after it, the compiler's floor, the solver's least peak, or at
last the memory over the whole step (the timeline's rows summed).
Prints one line per rule; with --write, puts the witnesses in
tests/rules/witnesses.json. A rule whose effect another rule hides (each
switched off alone changes nothing) keeps the witness written for it by hand
there, with that rule in "also_off" (switched off in both runs), if it still
holds; rules with neither are reported, and must be listed in
rules_test.cpp's kNoWitnessYet.

    scripts/find-rule-witnesses.py [--build build] [--write]

Takes about four minutes on a 2-core machine.
"""
import argparse
import concurrent.futures
import itertools
import json
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "rules" / "witnesses.json"
TINY = {"name": "tiny", "architecture": "graphcast", "grid_nodes": 2000, "mesh_nodes": 500, "grid2mesh_edges": 3000,
        "mesh_edges": 3000, "mesh2grid_edges": 6000, "latent_size": 64, "mlp_hidden_layers": 1, "processor_steps": 4,
        "grid_input_features": 20, "mesh_input_features": 20, "edge_features": 4, "output_features": 10}
PLANS = {
    "none": "none", "full": "full", "every2": "every:2", "deepmind": "deepmind:4",
    "step": {"checkpoints": [{"from": "processor.0", "to": "processor.1"}, {"from": "processor.2", "to": "processor.3"}],
             "step_checkpoint": True},
    "stepnone": {"checkpoints": [], "step_checkpoint": True},
    "offload": {"checkpoints": [{"from": "encoder", "to": "decoder"}], "step_checkpoint": True, "host_offload": True},
    "offload2": {"checkpoints": [{"from": "processor.0", "to": "processor.3"}], "step_checkpoint": True,
                 "host_offload": True, "edge_blocks": {"encoder": 3}},
    "blocks": {"checkpoints": [{"from": "processor.0", "to": "processor.3"}],
               "edge_blocks": {"encoder": 4, "decoder": 2, "processor.1": 3}},
    "blocks_top": {"checkpoints": [], "edge_blocks": {"decoder": 3, "processor.0": 2}},
    "blocks_all": {"checkpoints": [], "edge_blocks": {"decoder": 3, "processor.0": 2, "encoder": 4}},
    "offload_blocks": {"checkpoints": [], "step_checkpoint": True, "host_offload": True,
                       "edge_blocks": {"decoder": 3, "encoder": 2, "processor.1": 2}},
    "enc_dec": {"checkpoints": [{"from": "encoder", "to": "encoder"}, {"from": "decoder", "to": "decoder"}]},
    "nested": {"checkpoints": [{"from": "encoder", "to": "decoder",
                                "inner": [{"from": "processor.0", "to": "processor.1"}]}]},
}
FIGURES = ["peak_bytes", "forward_peak_bytes", "activation_bytes_after_forward", "compiler_floor_bytes"]
# The last resort, for a rule that changes memory away from every peak: the
# sum over the timeline's rows (one per op run) of the bytes live after it.
TIMELINE_FIGURE = "timeline_bytes"


def write_inputs(actmem, folder):
    """The models (by witness name) and plans (by key) as files or built-in names."""
    models = {}
    for implementation in ["deepmind", "physicsnemo", "anemoi"]:
        path = folder / f"tiny-{implementation}.json"
        path.write_text(json.dumps(dict(TINY, implementation=implementation)))
        models[f"tiny-{implementation}"] = str(path)
    small = next(m for m in json.loads(run([actmem, "models", "--json"])) if m["name"] == "graphcast-small")
    for key in ["fingerprint", "parameters"]:
        small.pop(key)
    small["processor_steps"] = 4
    (folder / "small4.json").write_text(json.dumps(small))
    models["small4"] = str(folder / "small4.json")
    plans = {}
    for key, plan in PLANS.items():
        if isinstance(plan, str):
            plans[key] = plan
        else:
            (folder / f"{key}.json").write_text(json.dumps(plan))
            plans[key] = str(folder / f"{key}.json")
    return models, plans


def run(args):
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def cases(models):
    """(command, model, framework, dtype, batch, rollout, plan key or None)."""
    for model, framework, dtype, batch, rollout in itertools.product(
            models, ["jax", "pytorch"], ["bfloat16", "float32"], [1, 2], [1, 2, 3]):
        if framework == "jax" and model in ("tiny-physicsnemo", "tiny-anemoi"):
            continue  # the implementations differ only in PyTorch
        for plan in PLANS:
            if "offload" not in plan or framework == "jax":
                yield ("simulate", model, framework, dtype, batch, rollout, plan)
        if rollout < 3 and model in ("small4", "tiny-deepmind", "tiny-anemoi"):
            yield ("fit", model, framework, dtype, batch, rollout, None)


def figures(actmem, models, plans, case, rule, also_off=(), timeline=False):
    """The case's figures; with `timeline`, only TIMELINE_FIGURE (a simulation's)."""
    command, model, framework, dtype, batch, rollout, plan = case
    args = [actmem, command, "--model", models[model], "--framework", framework, "--dtype", dtype, "--batch",
            str(batch), "--rollout", str(rollout), "--device", "tpu-v4", "--json", "--quiet"]
    args += ["--plan", plans[plan]] if command == "simulate" else ["--headroom", "0"]
    for name in ([rule] if rule else []) + list(also_off):
        args += ["--rule-off", name]
    with tempfile.NamedTemporaryFile(suffix=".csv") as csv:
        if timeline:
            args += ["--timeline", csv.name]
        done = subprocess.run(args, capture_output=True, text=True)
        if done.returncode not in (0, 1):
            return None  # refused (a plan the run cannot take without the rule)
        if timeline:  # the last column is each row's total
            return {TIMELINE_FIGURE: sum(int(row.rsplit(",", 1)[1]) for row in open(csv.name).readlines()[1:])}
    report = json.loads(done.stdout)
    return {"min_peak_bytes": report["min_peak_bytes"]} if command == "fit" else {f: report[f] for f in FIGURES}


def witness(grid, base, off):
    """The first figure, in FIGURES order, that differs on some case, on the first such case."""
    for figure in FIGURES + ["min_peak_bytes", TIMELINE_FIGURE]:
        for case in grid:
            before, after = base[case], off[case]
            if before and after and figure in before and before[figure] != after[figure]:
                command, model, framework, dtype, batch, rollout, plan = case
                entry = {"model": model, "framework": framework, "dtype": dtype, "batch": batch, "rollout": rollout}
                if plan:
                    entry["plan"] = PLANS[plan]
                return dict(entry, figure=figure, on=before[figure], off=after[figure])
    return None


def recheck(actmem, models, plans, rule, entry):
    """A hand-made witness (with "also_off") with its figures now, or None if the rule no longer changes it."""
    plan = entry.get("plan")
    key = next((k for k, p in PLANS.items() if p == plan), None) if plan is not None else None
    if plan is not None and key is None:
        return None
    case = ("simulate" if plan is not None else "fit", entry["model"], entry["framework"], entry["dtype"],
            entry["batch"], entry["rollout"], key)
    also_off = entry.get("also_off", [])
    before = figures(actmem, models, plans, case, None, also_off)
    after = figures(actmem, models, plans, case, rule, also_off)
    if not before or not after or before[entry["figure"]] == after[entry["figure"]]:
        return None
    return dict(entry, on=before[entry["figure"]], off=after[entry["figure"]])


def smallest_first(case):
    command, model, framework, dtype, batch, rollout, plan = case
    return (not model.startswith("tiny"), rollout, batch, dtype != "bfloat16", list(PLANS).index(plan) if plan else 0,
            case)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=str(ROOT / "build"))
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    actmem = str(pathlib.Path(args.build) / "cli" / "actmem")
    rules = [r["name"] for r in json.loads(run([actmem, "rules", "--json"]))]
    by_hand = {r: w for r, w in json.loads(OUT.read_text()).items() if "also_off" in w} if OUT.exists() else {}
    with tempfile.TemporaryDirectory() as folder:
        models, plans = write_inputs(actmem, pathlib.Path(folder))
        grid = sorted(cases(models), key=smallest_first)
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            base = dict(zip(grid, pool.map(lambda c: figures(actmem, models, plans, c, None), grid)))
            found, missing, timelines = {}, [], {}
            for rule in rules:
                off = dict(zip(grid, pool.map(lambda c: figures(actmem, models, plans, c, rule), grid)))
                entry = witness(grid, base, off)
                if not entry and rule in by_hand:
                    entry = recheck(actmem, models, plans, rule, by_hand[rule])
                if not entry:
                    simulations = [c for c in grid if c[0] == "simulate"]
                    if not timelines:
                        timelines.update(zip(simulations, pool.map(
                            lambda c: figures(actmem, models, plans, c, None, timeline=True), simulations)))
                    off = dict(zip(simulations, pool.map(
                        lambda c: figures(actmem, models, plans, c, rule, timeline=True), simulations)))
                    entry = witness(simulations, timelines, off)
                if entry:
                    found[rule] = entry
                    print(f"{rule}: {entry['model']} {entry['framework']} {entry['dtype']} batch {entry['batch']} "
                          f"rollout {entry['rollout']}: {entry['figure']} {entry['on']} on, {entry['off']} off"
                          + (f" (with {', '.join(entry['also_off'])} off)" if "also_off" in entry else ""))
                else:
                    missing.append(rule)
                    print(f"{rule}: no witness among {len(grid)} runs")
    if args.write:
        OUT.parent.mkdir(exist_ok=True)
        OUT.write_text(json.dumps(found, indent=1) + "\n")
        print(f"wrote {OUT.relative_to(ROOT)}: {len(found)} witnesses; none for {', '.join(missing) or 'no rule'}")


if __name__ == "__main__":
    sys.exit(main())

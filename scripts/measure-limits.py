#!/usr/bin/env python3
"""The limits table of docs/reliability.md, measured now.

For each limit on what actmem accepts (planner/include/actmem/util/limits.h),
runs the largest accepted input of that kind (and, where a limit refuses
early, the input it refuses) through the built `actmem` and the Python
module, and records user CPU time and peak resident memory from
/usr/bin/time. Prints the table; with --write, puts it in
docs/reliability.md between its markers.

    scripts/measure-limits.py [--build build] [--write]

Takes about five minutes on a 2-core machine; user CPU time, unlike wall
time, is not stretched much by other work on the machine.
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "reliability.md"
BEGIN, END = "<!-- limits:begin (scripts/measure-limits.py --write) -->", "<!-- limits:end -->"

TINY = {"name": "tiny", "architecture": "graphcast", "grid_nodes": 2000, "mesh_nodes": 500, "grid2mesh_edges": 3000,
        "mesh_edges": 3000, "mesh2grid_edges": 6000, "latent_size": 64, "mlp_hidden_layers": 1,
        "processor_steps": 4, "grid_input_features": 20, "mesh_input_features": 20, "edge_features": 4,
        "output_features": 10}
WIDE = dict(TINY, name="16x64", processor_steps=16, mlp_hidden_layers=64)
HUGE = dict(TINY, name="huge", grid_nodes=2**30, mesh_nodes=2**28, grid2mesh_edges=2**31, mesh_edges=2**31,
            mesh2grid_edges=3 * 2**30, processor_steps=1)


class Runner:
    def __init__(self, build, folder):
        self.actmem = str(ROOT / build / "cli" / "actmem")
        self.python_path = str(ROOT / build / "python" / "package")
        self.folder = folder

    def file(self, name, text):
        path = self.folder / name
        path.write_text(text)
        return str(path)

    def measure(self, args, expect=(0, 1), python=None):
        """(user seconds, peak MB, exit code) of one run of actmem ARGS, or of a Python snippet."""
        stats = self.folder / "time.txt"
        if python is None:
            command = [self.actmem, *args, "--quiet"]
            env = None
        else:
            command = ["/usr/bin/python3", "-c", python]
            env = dict(os.environ, PYTHONPATH=self.python_path)
        done = subprocess.run(["/usr/bin/time", "-q", "-f", "%U %M", "-o", str(stats), *command], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=self.folder)
        if done.returncode not in expect:
            sys.exit(f"measure-limits: {' '.join(command)} exited {done.returncode}, expected {expect}: "
                     f"{done.stderr[-500:]}")
        seconds, kilobytes = stats.read_text().split()
        return float(seconds), int(kilobytes) / 1024, done.returncode

    def rule_names(self):
        """Every memory rule's name (`actmem rules --json`)."""
        out = subprocess.run([self.actmem, "rules", "--json"], capture_output=True, text=True, check=True).stdout
        return [rule["name"] for rule in json.loads(out)]

    def cost(self, label, args, expect=(0, 1), python=None):
        seconds, megabytes, _ = self.measure(args, expect, python)
        print(f"  {label}: {seconds:.2f} s, {megabytes:.0f} MB", file=sys.stderr)
        return f"{label}: {seconds:.2f} s, {megabytes:.0f} MB"

    def largest(self, option, high, args):
        """The largest value of OPTION (1 … HIGH) whose step actmem builds: bisection on its refusal."""
        low = 1
        while low < high:
            mid = (low + high + 1) // 2
            _, _, code = self.measure(["simulate", *args, option, str(mid)], expect=(0, 1, 2))
            low, high = (mid, high) if code != 2 else (low, mid - 1)
        return low


def nested_plan(levels):
    region = {"from": "processor.0", "to": "processor.1"}
    for _ in range(levels - 1):
        region = {"from": "processor.0", "to": "processor.1", "inner": [region]}
    return {"checkpoints": [region]}


def rows(r):
    tiny = r.file("tiny.json", json.dumps(TINY))
    wide = r.file("16x64.json", json.dumps(WIDE))
    huge = r.file("huge.json", json.dumps(HUGE))
    blocks = r.file("blocks.json", json.dumps({"checkpoints": [], "edge_blocks": {
        s: 1024 for s in ["encoder", "processor.0", "processor.1", "processor.2", "processor.3", "decoder"]}}))
    nested = r.file("nested.json", json.dumps(nested_plan(16)))
    padded = json.dumps({"checkpoints": [{"from": "encoder", "to": "decoder"}]})
    big_file = r.file("16mib.json", padded[:-1] + " " * (16 * 2**20 - len(padded)) + "}")
    many = r.file("many.json", '{"checkpoints": [' + ",".join(["{}"] * 5_500_000) + "]}")
    f32 = ["--dtype", "float32", "--framework", "pytorch"]
    batch = r.largest("--batch", 65536, ["--model", huge, *f32])
    jax_rollout = r.largest("--rollout", 1024, [])
    torch_rollout = r.largest("--rollout", 1024, ["--framework", "pytorch"])
    wide_rollout = r.largest("--rollout", 1024, ["--model", wide])
    return [
        ("batch", "1 … 65,536", "",
         [r.cost("the tiny model at batch 65,536, float32, PyTorch, `fit`", ["fit", "--model", tiny, "--batch",
                                                                              "65536", *f32])]),
        ("rollout", "1 … 1,024", "",
         [r.cost("the tiny model at rollout 1,024 (JAX), `fit`", ["fit", "--model", tiny, "--rollout", "1024"])]),
        ("ops in one training step", "2^17 = 131,072 (rollout × ops per step)",
         "building, simulating and solving grow with it",
         [r.cost(f"GraphCast at rollout {jax_rollout} (JAX), the longest accepted, `fit`",
                 ["fit", "--rollout", str(jax_rollout)]),
          r.cost(f"at rollout {torch_rollout} (PyTorch) on an H200", ["fit", "--rollout", str(torch_rollout),
                                                                       "--framework", "pytorch", "--device",
                                                                       "h200-141gb"]),
          r.cost("at rollout 12, `fit`", ["fit", "--rollout", "12"])]),
        ("bytes of all tensors of one step", "2^56 (64 PiB)", "every byte figure stays below 2^62 (see below)",
         [r.cost(f"a model of 2^30 grid nodes at batch {batch}, float32, PyTorch, the largest accepted, `fit` on a "
                 "4 PiB device", ["fit", "--model", huge, "--batch", str(batch), *f32, "--memory", str(2**52)])]),
        ("processor steps", "1 … 16",
         "the solver's work grows steeply with the stage chain",
         [r.cost("16 × 64 (16 steps, 64 hidden layers per MLP) at rollout 1, `fit`", ["fit", "--model", wide]),
          r.cost("at rollout 2", ["fit", "--model", wide, "--rollout", "2"]),
          r.cost(f"at rollout {wide_rollout}, the longest accepted",
                 ["fit", "--model", wide, "--rollout", str(wide_rollout)])]),
        ("`--nested-regions`", "the same limits", "opt-in, slower search",
         [r.cost("16 × 64 at rollout 1", ["fit", "--model", wide, "--nested-regions"]),
          r.cost("at rollout 12", ["fit", "--model", wide, "--rollout", "12", "--nested-regions"]),
          r.cost(f"GraphCast at rollout {jax_rollout}", ["fit", "--rollout", str(jax_rollout), "--nested-regions"])]),
        ("MLP hidden layers", "1 … 64", "", ["in the two rows above"]),
        ("nodes or edges of a set; latent size, feature widths", "1 … 2^40; 1 … 2^20", "",
         ["bounded by the step's bytes (above)"]),
        ("grid resolution; mesh level", "≥ 0.25°, dividing 180 and 360; 0 … 8",
         "0.1° took 1.6 s and 750 MB at mesh level 6, 0.05° up to 15 s and 7 GB; level 10 8 s and 2.3 GB",
         [r.cost("`mesh --resolution 0.25 --mesh-level 8 --radius-fraction 2` (a model file with that geometry "
                 "costs the same to load)", ["mesh", "--resolution", "0.25", "--mesh-level", "8",
                                             "--radius-fraction", "2"])]),
        ("edge blocks per stage", "1 … min(edges, 1,024)", "the solver's largest choice; the schedule holds a "
         "size per block",
         [r.cost("1,024 on every blockable stage of the tiny model at rollout 1,024, `simulate`",
                 ["simulate", "--model", tiny, "--rollout", "1024", "--plan", blocks])]),
        ("nesting of checkpoint regions", "16 levels", "recursion, and recomputation per level",
         [r.cost("a 16-level plan on the tiny model, `simulate`", ["simulate", "--model", tiny, "--plan", nested])]),
        ("timeline rows (`--timeline`, `timeline=True`, `report`)", "2^17 = 131,072",
         "a row per op run, blocks run one by one",
         [r.cost("the tiny model at rollout 2 with `deepmind:1024`, `simulate --timeline`",
                 ["simulate", "--model", tiny, "--rollout", "2", "--plan", "deepmind:1024", "--timeline",
                  str(r.folder / "t.csv")]),
          r.cost("the same from Python, `simulate(timeline=True)`", [], python=(
              "import actmem, json; actmem.simulate(json.loads(%r), rollout=2, plan='deepmind:1024', "
              "timeline=True)" % json.dumps(TINY))),
          r.cost("`report`, GraphCast at rollout 12", ["report", "--rollout", "12", "-o", str(r.folder / "r.html")]),
          r.cost("at rollout 60 (with host offload; 99 is refused)", ["report", "--rollout", "60", "-o",
                                                                       str(r.folder / "r.html")]),
          r.cost("16 × 64 at rollout 2", ["report", "--model", wide, "--rollout", "2", "-o",
                                          str(r.folder / "r.html")])]),
        ("`--peak-buffers`", "1 … 1,000,000 listed", "the buffers are listed once, at the peak, from a second run",
         [r.cost(f"GraphCast at rollout {jax_rollout}, all of them",
                 ["simulate", "--rollout", str(jax_rollout), "--peak-buffers", "1000000"])]),
        ("device memory, reserve; FLOP/s, bandwidth; budget",
         "≤ 2^52 bytes (4 PiB); 10^6 … 10^21 per second; ≤ the device's memory",
         "times stay finite; a larger budget answered \"fits\" for a step the device cannot hold", ["no cost"]),
        ("JSON files", "≤ 16 MiB, nesting ≤ 64 levels, numbers within float64", "",
         [r.cost("a 16 MiB plan file, `simulate --plan`", ["simulate", "--model", tiny, "--plan", big_file])]),
        ("values in one JSON document or Python value", "2^16 = 65,536 (a value reached twice counts twice)",
         "a 16 MiB plan of 5.6 million {} took 1.03 GB; a Python list doubled 30 times, 3.8 GB and an abort",
         [r.cost("a plan file of 5.5 million {}, refused", ["simulate", "--model", tiny, "--plan", many],
                 expect=(2,)),
          r.cost("Python: a plan whose stages are a list doubled 30 times, refused", [], python=(
              "import actmem\nx = [1]\nfor _ in range(30): x = [x, x]\n"
              "try: actmem.simulate(plan={'checkpoints': [], 'stages': x})\nexcept actmem.InputError: pass"))]),
        ("memory rules switched off (`--rule-off`, `rules_off=`, a plan's `run.rules_off`)",
         "256 names, each a rule's", "more than there are rules is a mistake",
         [r.cost("GraphCast at rollout 12 with every rule off, `fit`",
                 ["fit", "--rollout", "12"] + [a for name in r.rule_names() for a in ("--rule-off", name)])]),
        ("`sweep` rows (devices × batches × rollouts)", "256", "each row is one fit",
         [r.cost("graphcast-small, 14 devices × 18 batch sizes", ["sweep", "--model", "graphcast-small",
                                                                   "--batch", ",".join(str(b) for b in range(1, 19))]),
          r.cost("GraphCast, 14 devices × batches 1, 2, 4 × rollouts 1, 2, 4, 8, 12",
                 ["sweep", "--batch", "1,2,4", "--rollout", "1,2,4,8,12"])]),
        ("error messages", "2 KiB, one printable line", "", ["no cost"]),
    ]


def table(measured):
    lines = ["| what | limit | why | the largest accepted input: user CPU, peak memory |", "|---|---|---|---|"]
    for what, limit, why, costs in measured:
        lines.append(f"| {what} | {limit} | {why} | {'; '.join(costs)} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build", help="the build folder (default: build)")
    parser.add_argument("--write", action="store_true", help="write the table into docs/reliability.md")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="actmem-limits-") as folder:
        text = table(rows(Runner(args.build, pathlib.Path(folder))))
    if not args.write:
        print(text, end="")
        return
    doc = DOC.read_text()
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(doc):
        sys.exit(f"measure-limits: {DOC} has no {BEGIN} … {END} markers")
    DOC.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}{END}", doc))
    print(f"measure-limits: wrote the table into {DOC.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

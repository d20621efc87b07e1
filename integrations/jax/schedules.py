#!/usr/bin/env python3
"""actmem-jax schedules: which of its three orders XLA:TPU kept for each stored validation case.

XLA's default module scheduler (xla/service/hlo_memory_scheduler.cc) orders
the whole module three ways, by its list scheduler, by DFSMemoryScheduler and
in plain post-order, measures each with its heap simulator and keeps the
least. actmem models the list order (docs/journal.md J16) and reads
XLA's choice off the plan (simulate/xla_module_order.h; J52 for what the
depth-first loop body holds): depth-first where a rollout without step
checkpoints leaves the encoder and decoder outside every checkpoint,
post-order where it leaves one of them, else the list order. At
libtpu's `TPU_VMODULE=hlo_memory_scheduler=2` XLA logs the three figures
("Min-memory list sequence: …") and its choice; this compiles each chosen
case's step under its stored plan (validate.py's results) for TPU v4 up to
the end of the HLO passes, seconds for `mid`, about 20 s for
graphcast-small, and prints one line per case.

Usage:
  schedules.py [--only TEXT] [--out FILE]
Exit: 0, or 2 with `actmem-jax: error: ...` on bad input.
"""
from __future__ import annotations

import json
import re
import sys
import tempfile

import judge
import validate
from validation_store import read_results  # noqa: E402  (on the path validate.py sets)

FIGURE = re.compile(r"\] Min-memory (list|dfs|post order) sequence: (\S+)$", re.M)
CHOSEN = re.compile(r"\] Chose min-memory (\S+) sequence", re.M)


def schedules(text: str) -> tuple[dict[str, str], str]:
    """The three module figures XLA logged and the order it kept."""
    chosen = CHOSEN.search(text)
    figures = dict(FIGURE.findall(text))
    if chosen is None or len(figures) != 3:
        raise judge.UsageError("the compile logged no module schedules (libtpu's TPU_VMODULE="
                               "hlo_memory_scheduler=2 had no effect: a libtpu without that log?)")
    return figures, chosen[1]


def parse_args(argv):
    p = judge.Parser(prog="schedules.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default="", help="only the stored cases whose name contains this")
    p.add_argument("--out", help="also append each case's line as JSON to this file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv)
        judge.require_packages(["tpu-v4"])
        stored = {r["case"]["name"]: r for r in read_results(validate.STORED_RESULTS)}
        chosen = [c for c in validate.cases() if args.only in c.name and c.name in stored]
        if not chosen:
            raise judge.UsageError(f"--only: no stored case's name contains '{args.only}'")
        for case in chosen:
            with tempfile.TemporaryDirectory() as tmp:
                argv_ = validate.stored_plan_arguments(case, stored[case.name]["plan"], tmp)
                text = judge.hlo_passes_log(argv_, judge.PROBE_HBM_MIB, vmodule="hlo_memory_scheduler=2")
            figures, kept = schedules(text)
            print(f"{case.name}: list {figures['list']}, DFS {figures['dfs']}, post-order {figures['post order']}; "
                  f"XLA kept {kept}", flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(json.dumps({"case": case.name, "figures": figures, "kept": kept}) + "\n")
    except (judge.UsageError, OSError, ValueError) as e:
        print(f"actmem-jax: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""actmem-jax xla_peak: what XLA holds at its peak, by line of the reference model.

Reads an XLA dump of the training step (judge.py run with
XLA_FLAGS=--xla_dump_to=DIR; see README.md "What XLA holds at its peak")
and lists every buffer live at the peak of the compiled program, from
`*after_optimizations-live-range.txt` ("Live ranges at N (peak)"), with its
size, the HLO instruction that made it and where in graphcast_jax.py that
instruction comes from: the op JAX named (`dot_general`, `gather`, ...), the
call chain of file lines (`mlp:240<_decoder:331<...`) and whether it is
part of a recomputation (`rematted_computation`: a checkpoint's, or the
rollout step's under step_checkpoint). Async copies, bitcasts and tuple
elements are followed to the instruction whose value they hold. Compare the
list with `actmem simulate --peak-buffers N` for the same plan.

Usage: xla_peak.py DUMP_DIR [--min-mib M] [--module N]
Exit: 0, or 2 with `actmem-jax: error: ...` when the dump lacks the files.
"""
from __future__ import annotations

import argparse
import collections
import glob
import os
import re
import sys

MODEL_FILE = "graphcast_jax.py"
FOLLOWED = ("copy-start", "copy-done", "bitcast", "get-tuple-element", "slice-start", "slice-done")
BUFFER = re.compile(r"^\s+(\S+?)(\{[\d,]*\})?: (\d+) bytes", re.M)
DEFINITION = re.compile(r"^\s*(?:ROOT )?%(\S+) = (.*)$", re.M)


class DumpError(Exception):
    """A one-line error for `actmem-jax: error: ...`, exit 2."""


def dump_files(directory: str, module: str) -> tuple[str, str]:
    """The live-range report and the optimised HLO of the dump's module
    (the training step is module 0000 when judge.py compiles one case)."""
    def one(suffix: str) -> str:
        found = sorted(glob.glob(os.path.join(directory, f"module_{module}.*{suffix}")))
        if not found:
            raise DumpError(f"{directory}: no module_{module}.*{suffix} (compile with "
                            f"XLA_FLAGS=--xla_dump_to={directory} and let the compile finish)")
        return found[0]
    return one("after_optimizations-live-range.txt"), one("after_optimizations.txt")


class SourceMap:
    """stack_frame_id -> call chain of the reference model's lines, from the
    FileNames / FunctionNames / FileLocations / StackFrames tables at the
    head of an HLO text dump (a frame's parent_frame_id counts from 1; 0 is
    none)."""

    def __init__(self, hlo: str):
        head = hlo.split("\nHloModule", 1)[0] if hlo.startswith("FileNames") else hlo[:hlo.find("\nENTRY")]
        self.files = self._table(head, "FileNames", r'^(\d+) "([^"]*)"$')
        self.functions = self._table(head, "FunctionNames", r'^(\d+) "([^"]*)"$')
        self.locations = {int(i): (int(f), int(fn), int(line)) for i, f, fn, line in re.findall(
            r"^(\d+) \{file_name_id=(\d+) function_name_id=(\d+) line=(\d+)", self._section(head, "FileLocations"),
            re.M)}
        self.frames = {int(i): (int(loc), int(parent or 0)) for i, loc, parent in re.findall(
            r"^(\d+) \{file_location_id=(\d+)(?: parent_frame_id=(\d+))?", self._section(head, "StackFrames"), re.M)}

    @staticmethod
    def _section(head: str, name: str) -> str:
        start = head.find(f"\n{name}\n")
        if start < 0:
            return ""
        end = head.find("\n\n", start + len(name) + 2)
        return head[start:end if end >= 0 else len(head)]

    def _table(self, head: str, name: str, pattern: str) -> dict[int, str]:
        return {int(i): text for i, text in re.findall(pattern, self._section(head, name), re.M)}

    def chain(self, frame: int, depth: int = 6) -> str:
        """`function:line<caller:line<...` over the model file's frames, innermost first."""
        out, seen = [], set()
        while frame in self.frames and frame not in seen and len(out) < depth:
            seen.add(frame)
            location, parent = self.frames[frame]
            file_id, function_id, line = self.locations.get(location, (0, 0, 0))
            if self.files.get(file_id, "").endswith(MODEL_FILE):
                out.append(f"{self.functions.get(function_id, '?').split('.')[-1]}:{line}")
            frame = parent - 1
        return "<".join(out) or "?"


def origin(name: str, definitions: dict[str, str], sources: SourceMap) -> tuple[str, str, bool]:
    """(JAX op, model call chain, made in a recomputation) of the value the
    buffer of instruction `name` holds."""
    for _ in range(8):
        text = definitions.get(name, "")
        kind = re.match(r"(?:\(.*?\)|\S+) ([\w-]+)\(", text)
        if not kind or kind[1] not in FOLLOWED:
            break
        operand = re.search(r"\(%([^,)\s]+)", text[kind.end(1):])
        if not operand:
            break
        name = operand[1]
    text = definitions.get(name, "")
    op_name = re.search(r'op_name="([^"]*)"', text)
    frame = re.search(r"stack_frame_id=(\d+)", text)
    path = op_name[1] if op_name else ""
    op = path.rsplit("/", 1)[-1] if path else (re.match(r"(?:\(.*?\)|\S+) ([\w-]+)\(", text) or [None, "?"])[1]
    return op, sources.chain(int(frame[1])) if frame else "?", "rematted_computation" in path


def peak_buffers(directory: str, module: str = "0000") -> tuple[int, int | None, list[dict]]:
    """(the peak's position in XLA's instruction sequence, the peak's bytes
    as XLA states them (None if it does not), its buffers, largest first)."""
    live_range, hlo_path = dump_files(directory, module)
    report = open(live_range, errors="replace").read()
    start = re.search(r"Live ranges at (\d+) \(peak\):", report)
    if not start:
        raise DumpError(f"{live_range}: no 'Live ranges at N (peak):' section")
    end = report.find("Stack trace breakdown", start.end())
    stated = re.search(r"Stack trace breakdown for peak usage: ([\d ]+) bytes", report)
    hlo = open(hlo_path, errors="replace").read()
    definitions = {m[1]: m[2] for m in DEFINITION.finditer(hlo)}
    sources = SourceMap(hlo)
    buffers = []
    for m in BUFFER.finditer(report[start.end():end if end >= 0 else len(report)]):
        op, chain, recomputed = origin(m[1], definitions, sources)
        buffers.append({"instruction": m[1] + (m[2] or ""), "bytes": int(m[3]), "op": op, "source": chain,
                        "recomputed": recomputed})
    buffers.sort(key=lambda b: -b["bytes"])
    return int(start[1]), int(stated[1].replace(" ", "")) if stated else None, buffers


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="xla_peak.py", description=__doc__.split("\n\n")[0])
    p.add_argument("dump_dir")
    p.add_argument("--min-mib", type=float, default=1.0, help="list buffers of at least this size (default 1)")
    p.add_argument("--module", default="0000", help="module number in the dump's file names (default 0000)")
    args = p.parse_args(argv)
    try:
        position, stated, buffers = peak_buffers(args.dump_dir, args.module)
    except (DumpError, OSError) as e:
        print(f"actmem-jax: error: {e}", file=sys.stderr)
        return 2
    total = sum(b["bytes"] for b in buffers)
    print(f"peak at instruction {position} of the sequence: {total / 2**30:.3f} GiB in {len(buffers)} buffers"
          + ("" if stated in (None, total) else f" (XLA states {stated / 2**30:.3f} GiB)"))
    by_source: collections.Counter[str] = collections.Counter()
    for b in buffers:
        by_source["recomputed" if b["recomputed"] else "kept or made in the backward pass"] += b["bytes"]
        if b["bytes"] >= args.min_mib * 2**20:
            mark = "R" if b["recomputed"] else " "
            print(f"{b['bytes'] / 2**20:10.2f} MiB {mark} {b['op']:22s} {b['source']:60s} {b['instruction']}")
    for what, n in by_source.items():
        print(f"{n / 2**30:.3f} GiB {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""actmem-jax remat_trace: where XLA:TPU's program peaks as written, and what it holds there.

XLA:TPU's rematerialisation pass first measures the scheduled program, one
computation at a time (loop bodies before the computations that call them),
and at libtpu's `TPU_VMODULE=hlo_rematerialization=3` it logs every
instruction it steps over and every buffer it makes live or dead. This
replays that log: per computation, the memory in use at each instruction
(plus, at a `while`, `call` or `conditional`, the peaks of the computations
it calls, as the pass adds them), its highest local peaks and the buffers
live there, largest first. The replayed peak of every computation is checked
against the one the pass states ("Peak memory for C"). With the HBM capped at
16 MiB (the default) nothing fits and the pass always runs, so this is the
program as written, the figure docs/validation-jax.md compares with actmem
(docs/journal.md J12); it also names the schedule XLA chose ("Chose
min-memory list sequence": XLA's list scheduler, J16). With --updates N it
lists the N optimizer updates that run longest after their operands were
made: XLA fuses each weight gradient's dot into its Adam update, so an
update that waits holds its linear's activation and output gradient
(docs/journal.md J32: the decoder's edge embedding's).

Seconds for small models, a minute or more at GraphCast's size; the log is
large (tens of MB for `mid`), so it is read and dropped unless --keep-log.

Usage:
  remat_trace.py [judge.py arguments] [--hbm-mib M] [--peaks N] [--min-mib M] [--computation TEXT]
                 [--updates N] [--keep-log FILE]
  remat_trace.py --log FILE [--peaks N] [--min-mib M] [--computation TEXT] [--updates N]
Exit: 0, or 2 with `actmem-jax: error: ...` on bad input.
"""
from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

import judge

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from validation_store import write_whole  # noqa: E402

BEGIN = re.compile(r"\] BeginInstruction (\S+)$")
BUFFER = re.compile(r"\]\s+Buffer (?:Buffer )?(\d+) \(defined by (\S+), size (\d+) bytes\) is now (live|dead)")
USAGE = re.compile(r"\]\s+memory usage = (\d+)$")
STATED_PEAK = re.compile(r"\] Peak memory for (\S+): (\S+)$")
MODULE_PEAK = re.compile(r"\] Peak memory usage of module \(before\): (\S+)$", re.M)
MEASURING_STARTS = re.compile(r"\] Adjusted memory limit accounting for output")
SCHEDULE = re.compile(r"\] Chose min-memory (\S+) sequence: (\S+)$", re.M)
MOMENT = re.compile(r"opt_state__mu____(\S+?)__\.\d+")
CALLER = re.compile(r"%(\S+) = .*? (?:while|call|conditional)\(.*?"
                    r"(?:condition=%(\S+?), body=%(\S+?)(?:,|$)|to_apply=%(\S+?)(?:,|$)|"
                    r"branch_computations=\{([^}]*)\})")


class TraceError(Exception):
    """A one-line error for `actmem-jax: error: ...`, exit 2."""


@dataclass
class Computation:
    """One computation as the pass measured it: per instruction, in order,
    its name and the memory in use while it runs (its callees' peaks
    included), and the buffer events between instructions."""
    name: str
    stated_peak: str = ""
    instructions: list[str] = field(default_factory=list)
    usage: list[int] = field(default_factory=list)
    # (when, buffer, defining instruction, bytes, made live): `when` is 2i for
    # an event of instruction i before its usage is measured, 2i + 1 after
    events: list[tuple[int, int, str, int, bool]] = field(default_factory=list)

    @property
    def peak(self) -> int:
        return max(self.usage, default=0)

    def live_at(self, position: int) -> list[tuple[int, str, int]]:
        """(bytes, defining instruction, where it became live) of every
        buffer live while instruction `position` runs, largest first."""
        live: dict[int, tuple[str, int, int]] = {}
        for when, buffer, by, size, alive in self.events:
            if when > 2 * position:
                break
            if alive:
                live[buffer] = (by, size, when // 2)
            else:
                live.pop(buffer, None)
        return sorted(((size, by, at) for by, size, at in live.values()), key=lambda x: -x[0])

    def local_peaks(self, count: int, apart: int = 40) -> list[int]:
        """Positions of the `count` highest usages at least `apart` instructions apart, in program order."""
        chosen: list[int] = []
        for position in sorted(range(len(self.usage)), key=lambda i: -self.usage[i]):
            if all(abs(position - c) >= apart for c in chosen):
                chosen.append(position)
            if len(chosen) == count:
                break
        return sorted(chosen)


@dataclass
class Trace:
    computations: list[Computation]
    module_peak: str
    schedule: str
    module: str = ""  # the module as the pass printed it, before measuring


@dataclass
class Update:
    """An optimizer update in a computation's order: where it runs, the
    parameter it writes, and where the last of its operands of at least the
    size asked for was made (-1: none)."""
    position: int
    name: str
    parameter: str
    operands_made: int

    @property
    def wait(self) -> int:
        return self.position - self.operands_made if self.operands_made >= 0 else 0


def updates(trace: Trace, computation: Computation, min_bytes: int) -> list[Update]:
    """The Adam updates (instructions reading a first moment, `opt_state['mu']`)
    of `computation`, each with where its operands of at least `min_bytes`
    were made, longest wait first."""
    import list_scheduler  # it reads the printed module, and builds on this module
    instructions = list_scheduler.parse_instructions(list_scheduler.computation_lines(trace.module, computation.name))
    by_name = {i.name: i for i in instructions}
    position = {name: i for i, name in enumerate(computation.instructions)}
    out = []
    for i, name in enumerate(computation.instructions):
        operands = by_name[name].operands if name in by_name else []
        moment = next((m for o in operands if (m := MOMENT.fullmatch(o))), None)
        if moment is None:
            continue
        made = [position[o] for o in operands
                if o in position and o in by_name and sum(list_scheduler.leaf_bytes(by_name[o].shape)) >= min_bytes]
        out.append(Update(i, name, moment[1], max(made, default=-1)))
    return sorted(out, key=lambda u: -u.wait)


def callees(text: str) -> dict[str, list[str]]:
    """instruction -> the computations it calls, from the module the pass prints first."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = CALLER.search(line)
        if m:
            names = [n for n in m.group(2, 3, 4) if n] or [b.strip().lstrip("%") for b in (m[5] or "").split(",")]
            out[m[1]] = [n for n in names if n]
    return out


def parse(text: str) -> Trace:
    """The pass's measurement of the program before it rematerialises anything."""
    begin = MEASURING_STARTS.search(text)
    end = MODULE_PEAK.search(text)
    if not begin or not end:
        raise TraceError("the log has no measurement by XLA's rematerialisation pass (run judge.py's step for "
                         "tpu-v4 with TPU_VMODULE=hlo_rematerialization=3 and an HBM it cannot fit)")
    calls = callees(text[:begin.start()])
    schedule = SCHEDULE.search(text)
    done: dict[str, int] = {}
    computations: list[Computation] = []
    current = Computation("")
    measured = True  # whether the current instruction's usage is known (the first usage line after its begin)
    for line in text[begin.end():end.start()].splitlines():
        if m := BEGIN.search(line):
            current.instructions.append(m[1])
            current.usage.append(0)
            measured = False
        elif m := BUFFER.search(line):
            when = 2 * (len(current.instructions) - 1) + measured
            current.events.append((when, int(m[1]), m[2], int(m[3]), m[4] == "live"))
        elif not measured and (m := USAGE.search(line)):
            called = sum(done.get(c, 0) for c in calls.get(current.instructions[-1], []))
            current.usage[-1] = int(m[1]) + called
            measured = True
        elif m := STATED_PEAK.search(line):
            current.name, current.stated_peak = m[1], m[2]
            done[current.name] = current.peak
            computations.append(current)
            current = Computation("")
    return Trace(computations, end[1], f"{schedule[1]} ({schedule[2]})" if schedule else "not stated",
                 text[:begin.start()])


def agrees(replayed: int, stated: str) -> bool:
    """Whether a replayed peak is the one the pass states, to the precision it prints (e.g. 1.08GiB)."""
    m = re.fullmatch(r"([\d.]+)([KMGT]?)i?B", stated)
    if not m:
        return False
    unit = judge.UNITS[m[2]]
    digits = len(m[1].split(".")[1]) if "." in m[1] else 0
    return abs(replayed / unit - float(m[1])) <= 0.5 * 10**-digits + 1e-9


def report(trace: Trace, peaks: int, min_mib: float, only: str | None, updates_shown: int = 0) -> str:
    lines = [f"XLA's schedule: {trace.schedule}; the module's peak as written: {trace.module_peak} "
             "(its largest computation's, plus the outputs)"]
    chosen = [c for c in trace.computations if only is None or only in c.name]
    if not chosen:
        raise TraceError(f"--computation: no computation's name contains '{only}' "
                         f"({', '.join(c.name for c in trace.computations)})")
    for c in sorted(chosen, key=lambda c: -c.peak)[: None if only else 2]:
        check = "as the pass states" if agrees(c.peak, c.stated_peak) else f"the pass states {c.stated_peak}"
        lines.append(f"\n{c.name}: peak {c.peak / 2**30:.3f} GiB ({check}), {len(c.instructions)} instructions")
        for position in c.local_peaks(peaks):
            lines.append(f"  at #{position} {c.instructions[position]}: {c.usage[position] / 2**30:.3f} GiB")
            for size, by, at in c.live_at(position):
                if size >= min_mib * 2**20:
                    lines.append(f"    {size / 2**20:10.2f} MiB  {by}  (live since #{at})")
        if updates_shown:
            lines.append(f"  the {updates_shown} updates that wait longest after their operands of {min_mib:g} MiB "
                         "or more were made:")
            for u in updates(trace, c, int(min_mib * 2**20))[:updates_shown]:
                lines.append(f"    #{u.position} {u.name} ({u.parameter}): operands made by #{u.operands_made}, "
                             f"+{u.wait}")
    return "\n".join(lines)


def add_log_arguments(p) -> None:
    """The options of a tool that reads the pass's log: a saved one, or a compile of judge.py's step."""
    p.add_argument("--log", help="read this libtpu INFO log instead of compiling")
    p.add_argument("--keep-log", help="write the log of the compile here")
    p.add_argument("--hbm-mib", type=judge.positive_int, default=judge.PROBE_HBM_MIB,
                   help=f"HBM to compile for (default {judge.PROBE_HBM_MIB}: nothing fits, the program as written)")


def log_text(args, step: list[str]) -> str:
    """The pass's log: read from --log, or compiled from judge.py's arguments `step` (kept with --keep-log)."""
    if args.log:
        return open(args.log, errors="replace").read()
    judge.require_packages(["tpu-v4"])
    text = judge.hlo_passes_log(step, args.hbm_mib, vmodule="hlo_rematerialization=3")
    if args.keep_log:
        write_whole(args.keep_log, text)
    return text


def parse_args(argv):
    p = judge.Parser(prog="remat_trace.py", description=__doc__.split("\n\n")[0])
    add_log_arguments(p)
    p.add_argument("--peaks", type=judge.positive_int, default=3, help="local peaks per computation (default 3)")
    p.add_argument("--min-mib", type=float, default=8.0, help="list buffers of at least this size (default 8)")
    p.add_argument("--computation", help="only computations whose name contains this (default: the two largest)")
    p.add_argument("--updates", type=judge.positive_int, default=0,
                   help="also list the N optimizer updates that wait longest after their operands (J32)")
    return p.parse_known_args(argv)


def main(argv=None) -> int:
    try:
        args, step = parse_args(sys.argv[1:] if argv is None else argv)
        print(report(parse(log_text(args, step)), args.peaks, args.min_mib, args.computation, args.updates))
    except (judge.UsageError, TraceError, OSError) as e:
        print(f"actmem-jax: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

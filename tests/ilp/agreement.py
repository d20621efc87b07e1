#!/usr/bin/env python3
"""actmem's optimum against an independent one: an ILP solved by HiGHS.

For each random small instance (tests/ilp/ilp_instances.cpp writes it: a
tiny GraphCast of 4-8 stages in a random configuration, as a mixed-integer
program, with actmem's solve() answers and times at its budgets), HiGHS
solves the program at every budget; ilp_instances then checks the ILP's
plan by simulate() and against actmem's answer. Exit 1 if any instance
disagrees, 2 on bad use. docs/solver.md "Independent optimum: an ILP".

  agreement.py --tool build/tests/ilp_instances [--instances 30] [--budgets 2]
               [--seed 1] [--space both|flat|nested] [--rollout 1|2]
               [--max-stages 8] [--max-nested-stages 8] [--table] [--jsonl FILE]
  agreement.py --table-from FILE[,FILE...]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import highspy
import numpy as np

# Memory rows in KiB (exact: bytes / 1024 is a dyadic fraction), so that
# HiGHS sees smaller coefficients. Every row's activity at a 0/1 point is a
# whole number of bytes, so "<= budget" is written "<= budget + 1/2 byte",
# the same set of plans, with half a byte of margin either way against
# HiGHS's tolerances; and the integrality tolerance is lowered from 1e-6 to
# 1e-9: at 1e-6 HiGHS returned x = 0.9999996 on two columns, a mix 1 byte
# under a budget that the rounded plan exceeds by 1 byte; at 1e-10 (its
# least) its presolve returned as optimal a plan 2.4e-4 slower than one
# that fits (rollout 2, seed 2, instance 12). `ilp_instances check`
# recomputes every chosen plan's peak in integer bytes, and evaluates
# actmem's plan in the program, so either slip fails the check.
MEMORY_UNIT = 1024.0
# Costs scaled so the largest is 1000 (a tiny model's stage recomputes in
# microseconds; HiGHS's tolerances are absolute). The check uses the
# program's own times, not HiGHS's objective.
COST_TOP = 1000.0


def solve(program, budget, static_bytes, time_limit_s):
    """HiGHS on the program at one budget: (status, chosen columns, CPU seconds in run())."""
    columns = program["columns"]
    m = len(columns)
    starts, index, value, lower, upper = [], [], [], [], []
    for row in program["memory_rows"]:
        starts.append(len(index))
        index += row["index"]
        value += [v / MEMORY_UNIT for v in row["value"]]
        lower.append(-highspy.kHighsInf)
        upper.append((budget - static_bytes - row["constant"] + 0.5) / MEMORY_UNIT)
    for eq in program["equalities"]:
        starts.append(len(index))
        index += eq["index"]
        value += [float(v) for v in eq["value"]]
        lower.append(float(eq["rhs"]))
        upper.append(float(eq["rhs"]))
    lp = highspy.HighsLp()
    lp.num_col_ = m
    lp.num_row_ = len(starts)
    top = max(c[7] for c in columns)
    lp.col_cost_ = np.array([c[7] * COST_TOP / top for c in columns], dtype=np.float64)
    lp.col_lower_ = np.zeros(m)
    lp.col_upper_ = np.ones(m)
    lp.row_lower_ = np.array(lower)
    lp.row_upper_ = np.array(upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kRowwise
    lp.a_matrix_.start_ = np.array(starts + [len(index)], dtype=np.int32)
    lp.a_matrix_.index_ = np.array(index, dtype=np.int32)
    lp.a_matrix_.value_ = np.array(value, dtype=np.float64)
    lp.integrality_ = [highspy.HighsVarType.kInteger] * m
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", 1)  # as actmem's solver: one core
    h.setOptionValue("mip_rel_gap", 0.0)  # proven optimal, not within a gap
    h.setOptionValue("mip_abs_gap", 0.0)
    h.setOptionValue("mip_feasibility_tolerance", 1e-9)  # see MEMORY_UNIT
    h.setOptionValue("time_limit", float(time_limit_s))
    h.passModel(lp)
    t0 = time.process_time()  # CPU seconds, as actmem's are measured (ilp_instances.cpp)
    h.run()
    seconds = time.process_time() - t0
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        x = h.getSolution().col_value
        return "optimal", [j for j in range(m) if x[j] > 0.5], seconds
    if status == highspy.HighsModelStatus.kInfeasible:
        return "infeasible", [], seconds
    return h.modelStatusToString(status), [], seconds


def print_table(lines):
    """The speed table of docs/solver.md: HiGHS's run() against actmem, by space and size."""
    print("\n| rollout | space | stages | instances × budgets | columns (median) | HiGHS run() (median CPU ms) "
          "| actmem (median CPU ms) | HiGHS / actmem (median) | (min–max) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rollout in (1, 2):
        for space in ("flat", "nested"):
            for stages in range(4, 9):
                rows = [r for r in lines if r.get("rollout", 1) == rollout and r["nested"] == (space == "nested")
                        and r["stages"] == stages]
                if not rows:
                    continue
                ratios = [r["ratio"] for r in rows]
                print(f"| {rollout} | {space} | {stages} | {len(rows)} | {statistics.median(r['columns'] for r in rows):.0f} "
                      f"| {statistics.median(r['highs_s'] for r in rows) * 1e3:.1f} "
                      f"| {statistics.median(r['actmem_s'] for r in rows) * 1e3:.2f} "
                      f"| {statistics.median(ratios):.0f}× | {min(ratios):.0f}–{max(ratios):.0f}× |")
    ratios = [r["ratio"] for r in lines]
    agree = sum(1 for r in lines if r["agree"])
    print(f"\n{len(lines)} pairs, {agree} agree; HiGHS / actmem median {statistics.median(ratios):.0f}×, "
          f"min {min(ratios):.1f}×, max {max(ratios):.0f}×; "
          f"{sum(1 for r in ratios if r >= 1000)} of {len(ratios)} at 1000× or more")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tool", help="the ilp_instances binary")
    parser.add_argument("--instances", type=int, default=30)
    parser.add_argument("--budgets", type=int, default=2, help="random budgets per instance (besides least-1 and least)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--space", choices=["both", "flat", "nested"], default="both",
                        help="both: flat and nested instances alternately")
    parser.add_argument("--rollout", type=int, choices=[1, 2], default=1,
                        help="2: every instance at rollout 2, against the dynamic program's frontier")
    parser.add_argument("--max-stages", type=int, default=8, help="flat instances: 4 to this many stages (<= 8)")
    parser.add_argument("--max-nested-stages", type=int, default=8, help="nested instances: 4 to this many stages")
    parser.add_argument("--time-limit", type=float, default=120, help="HiGHS seconds per solve")
    parser.add_argument("--table", action="store_true", help="print the speed table (markdown)")
    parser.add_argument("--jsonl", help="also write every (instance, budget) result to this file, as it comes")
    parser.add_argument("--table-from", metavar="JSONL", help="only print the table of a --jsonl file (several: comma-separated)")
    args = parser.parse_args()
    if args.table_from:
        lines = []
        for path in args.table_from.split(","):
            with open(path) as f:
                lines += [json.loads(line) for line in f if line.strip()]
        print_table(lines)
        return 0
    if not args.tool:
        print("agreement: error: --tool is required (the ilp_instances binary)", file=sys.stderr)
        return 2
    jsonl = open(args.jsonl, "w") if args.jsonl else None
    if args.instances < 1 or args.budgets < 0 or not (4 <= args.max_stages <= 8 and 4 <= args.max_nested_stages <= 8):
        print("agreement: error: --instances must be >= 1, --budgets >= 0, stages 4..8", file=sys.stderr)
        return 2

    lines, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="actmem-ilp-") as work:
        for i in range(args.instances):
            nested = args.space == "nested" or (args.space == "both" and i % 2 == 1)
            instance_path = os.path.join(work, f"instance-{i}.json")
            solution_path = os.path.join(work, f"solution-{i}.json")
            max_stages = args.max_nested_stages if nested else args.max_stages
            subprocess.run([args.tool, "write", str(args.seed), str(i), "1" if nested else "0", str(max_stages),
                            str(args.rollout), str(args.budgets), instance_path], check=True)
            with open(instance_path) as f:
                instance = json.load(f)
            results = []
            for answer in instance["actmem"]:
                status, chosen, seconds = solve(instance["program"], answer["budget"], instance["static_bytes"],
                                                args.time_limit)
                results.append({"status": status, "chosen": chosen, "highs_s": seconds})
            with open(solution_path, "w") as f:
                json.dump({"results": results}, f)
            check = subprocess.run([args.tool, "check", instance_path, solution_path], capture_output=True, text=True)
            if check.returncode not in (0, 1):
                print(check.stderr, file=sys.stderr)
                return 2
            for line, answer, result in zip(check.stdout.splitlines(), instance["actmem"], results):
                row = json.loads(line)
                row["actmem_s"] = answer["solve_s"]
                row["highs_s"] = result["highs_s"]
                row["ratio"] = result["highs_s"] / answer["solve_s"]
                lines.append(row)
                if jsonl:
                    jsonl.write(json.dumps(row) + "\n")
                    jsonl.flush()
                if not row["agree"]:
                    failed += 1
                    print("DISAGREE", json.dumps(row), flush=True)
            rows = lines[-len(results):]
            print(f"instance {i}: {instance['stages']} stages, {'nested' if nested else 'flat'}, "
                  f"{len(instance['program']['columns'])} columns, "
                  f"{instance['model']['implementation']} {instance['run']['framework']}: "
                  + ", ".join(("ok" if r["agree"] else "DISAGREE") + f" ({r['ilp_status']}, HiGHS {r['highs_s'] * 1e3:.1f} ms"
                              f" / actmem {r['actmem_s'] * 1e3:.2f} ms)" for r in rows), flush=True)

    feasible = sum(1 for r in lines if r["ilp_status"] == "optimal")
    print(f"\n{len(lines)} (instance, budget) pairs on {args.instances} instances (seed {args.seed}, "
          f"rollout {args.rollout}): "
          f"{len(lines) - failed} agree, {failed} disagree; {feasible} feasible, {len(lines) - feasible} not")
    if args.table:
        print_table(lines)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

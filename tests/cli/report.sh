#!/usr/bin/env bash
# `actmem report` end to end: every figure in the HTML equals what `actmem
# simulate --json`, `sweep --json` and the plan file say (report_check.py);
# --svg; exit codes; bad input leaves no file. `bash report.sh ACTMEM_BINARY SOURCE_DIR`.
source "$(dirname "$0")/lib.sh"

run=(--model graphcast-small --device tpu-v4 --budget 5GiB)
"$actmem" plan "${run[@]}" -o "$work/plan.json" 2>/dev/null || fail "plan exited $?"
"$actmem" report --plan "$work/plan.json" -o "$work/report.html" --svg "$work/timeline.svg" 2>"$work/stderr" ||
  fail "report --plan exited $?"
# The plan file's budget: the 5 GiB less plan's default 5% headroom.
grep -q "^wrote $work/report.html (.*): peak .* of 4.75 GiB, fits$" "$work/stderr" || fail "report note: $(cat "$work/stderr")"
"$actmem" simulate --plan "$work/plan.json" --json >"$work/sim.json" || fail "simulate: $?"
"$actmem" simulate --plan "$work/plan.json" --timeline "$work/timeline.csv" >/dev/null || fail "simulate --timeline: $?"
for builtin in none full; do
  "$actmem" simulate "${run[@]}" --plan "$builtin" --json >"$work/$builtin.json"
done
"$actmem" sweep --model graphcast-small --devices all --json >"$work/sweep.json" || fail "sweep: $?"
python3 "$(dirname "$0")/report_check.py" "$work/report.html" "$work/sim.json" "$work/plan.json" "$work/sweep.json" \
  "$work/none.json" "$work/full.json" "$work/timeline.csv" || fail "the report's figures differ from the CLI's"

# The report's notes (Report::notes) are in the page: JAX read for a GPU.
"$actmem" report --model graphcast-small --device h200-141gb -o "$work/gpu.html" --quiet || fail "report on a GPU: $?"
grep -q '<p class="sub">note: actmem&#39;s JAX profile is XLA:TPU&#39;s' "$work/gpu.html" || fail "no note in the GPU report"
! grep -q '>note: ' "$work/report.html" || fail "a note in the TPU report"

# --svg: the timeline alone, a file of its own with the same figures.
head -1 "$work/timeline.svg" | grep -q '^<?xml' || fail "timeline.svg has no XML declaration"
peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["peak_bytes"])' "$work/sim.json")
grep -q "<svg xmlns=\"http://www.w3.org/2000/svg\".* id=\"timeline\".* data-peak-bytes=\"$peak\"" "$work/timeline.svg" ||
  fail "timeline.svg: $(head -c 300 "$work/timeline.svg")"
! grep -q '<script' "$work/timeline.svg" || fail "timeline.svg has a script"

# Without --plan: the solver's plan, the one `fit` finds; -o - writes to stdout; --quiet says nothing.
"$actmem" report "${run[@]}" -o - --quiet >"$work/stdout.html" 2>"$work/quiet.err" || fail "report -o - exited $?"
[ ! -s "$work/quiet.err" ] || fail "--quiet wrote: $(cat "$work/quiet.err")"
"$actmem" fit "${run[@]}" --json >"$work/fit.json"
python3 - "$work/stdout.html" "$work/fit.json" <<'PY' || fail "report without --plan is not fit's plan"
import json, re, sys
html = open(sys.argv[1]).read()
figures = json.loads(re.search(r'<script type="application/json" id="actmem-figures">(.*?)</script>', html).group(1))
fit = json.load(open(sys.argv[2]))
for key, value in figures["simulate"].items():
    assert fit[key] == value, (key, fit[key], value)
PY

# A plan that does not fit is still drawn, and the exit code says so.
"$actmem" report --model graphcast-small --device tpu-v4 --plan none --budget 1GiB -o "$work/nofit.html" 2>/dev/null
[ $? -eq 1 ] || fail "a report of a plan that does not fit should exit 1"
grep -q '>does not fit<' "$work/nofit.html" || fail "nofit.html does not say it does not fit"

# Bad input: exit 2, one line, nothing written, no temporary left behind.
check_error "report: expected -o FILE (the HTML report) or --svg FILE (the timeline alone); see 'actmem report --help'" \
  report --model graphcast-small
check_error "--model: 'graphcats' is neither a preset (graphcast, graphcast-small, graphcast-operational) nor a readable file (did you mean 'graphcast'?)" \
  report --model graphcats -o "$work/bad.html"
check_error "--plan: 'sometimes' is not a plan file or a built-in plan (none, full, every:K, deepmind, deepmind:B)" \
  report --model graphcast-small --plan sometimes -o "$work/bad.html"
check_error "$work/missing/bad.html: cannot write: No such file or directory" \
  report --model graphcast-small --svg "$work/bad.svg" -o "$work/missing/bad.html"
[ ! -e "$work/bad.html" ] && [ ! -e "$work/bad.svg" ] || fail "a failed report left a file: $(ls "$work")"
[ -z "$(ls -A "$work" | grep '^\.')" ] || fail "temporary files left behind: $(ls -A "$work")"

finish

#!/usr/bin/env bash
# Hostile and careless input, end to end (docs/reliability.md): never a
# wrong "fits", never a crash, bounded time and memory, one error line with
# exit 2, output that cannot be written is an error, -o never replaces what
# is not a regular file. `bash hostile.sh ACTMEM_BINARY SOURCE_DIR`.
source "$(dirname "$0")/lib.sh"

# Every run is bounded: 60 s and 2 GiB. Old versions looped or took 12 GiB
# on some of these inputs.
bound_actmem 60 2097152

# ---- sizes that would overflow: never a "fits" (was FITS at -8530903002.58 GiB)
for command in fit "plan -o $work/overflow.json"; do
  # shellcheck disable=SC2086
  check_error_prefix "--batch: the training step is too large to plan" \
    $command --batch 65536 --rollout 1024 --dtype float32 --framework pytorch
done
[ ! -e "$work/overflow.json" ] || fail "a plan was written for an overflowing step"
check_error_prefix "--batch: the training step is too large to plan" \
  sweep --batch 65536 --rollout 1024 --dtype float32 --framework pytorch --devices tpu-v4

# ---- a budget above the device (was "fits" at 369 GiB on a 32 GiB chip)
check_error "--budget: expected a budget from 1 B to the memory of tpu-v4 (32.00 GiB), got 1024.00 GiB; a budget can only lower the memory a plan may use (describe a device with more memory instead)" \
  fit --device tpu-v4 --budget 1TiB
check_error_prefix "--budget: expected a budget from 1 B to the memory of v100-16gb" \
  sweep --model "$work/tiny.json" --devices a100-80gb,v100-16gb --budget 20GiB

# ---- a device whose speed makes times infinite (was "step time -nan", exit 0)
echo '{"id": "slow", "memory_bytes": 34359738368, "peak_fp32_flops": 1e12, "bandwidth_bytes_per_s": 5e-324}' \
  >"$work/slow.json"
check_error "$work/slow.json: /bandwidth_bytes_per_s: expected a number from 1e+06 to 1e+21, got 5e-324" \
  fit --model "$work/tiny.json" --device "$work/slow.json"

# ---- JSON nested 100,000 deep in every kind of file (was SIGSEGV)
/usr/bin/python3 -c 'print("[" * 100000 + "]" * 100000)' >"$work/deep.json"
check_error_prefix "$work/deep.json: /0/0/0" fit --model "$work/deep.json"
check_error_prefix "$work/deep.json: /0/0/0" fit --model "$work/tiny.json" --device "$work/deep.json"
check_error_prefix "$work/deep.json: /0/0/0" simulate --model "$work/tiny.json" --plan "$work/deep.json"
/usr/bin/python3 - "$work/inner.json" <<'PY'
import json, sys
region = {"from": "processor.0", "to": "processor.1"}
for _ in range(40):
    region = {"from": "processor.0", "to": "processor.1", "inner": [region]}
json.dump({"checkpoints": [region]}, open(sys.argv[1], "w"))
PY
check_error_prefix "$work/inner.json: /checkpoints/0/inner/0/inner/0" \
  simulate --model "$work/tiny.json" --plan "$work/inner.json"

# ---- numbers beyond float64, fields of the wrong type (were exit 3, internal error)
sed 's/"latent_size": 64/"latent_size": 1e400/' "$work/tiny.json" >"$work/e400.json"
check_error "$work/e400.json: /latent_size: number out of range: 1e400" fit --model "$work/e400.json"
/usr/bin/python3 - "$work/tiny.json" "$work/fingerprint.json" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
model["fingerprint"] = 12345
json.dump({"model": model, "checkpoints": []}, open(sys.argv[2], "w"))
PY
check_error "$work/fingerprint.json: /model/fingerprint: expected a string, got 12345" \
  simulate --plan "$work/fingerprint.json"

# ---- a geometry whose grid2mesh comes out empty (was SIGSEGV in the exports)
/usr/bin/python3 - "$work/tiny.json" "$work/empty.json" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
for key in ("grid_nodes", "mesh_nodes", "grid2mesh_edges", "mesh_edges", "mesh2grid_edges"):
    del model[key]
model.update(resolution_deg=10, mesh_level=0, radius_query_fraction=1e-9)
json.dump(model, open(sys.argv[2], "w"))
PY
check_error_prefix "$work/empty.json: /grid2mesh_edges: computed as 0 from the geometry" \
  plan --model "$work/empty.json" -o "$work/empty-plan.json"

# ---- bounded work: block counts, timelines, processor steps, plan parameters
check_error "--plan: expected every:N with N an integer from 1 to 16, got 'every:4294967296'" \
  simulate --model "$work/tiny.json" --plan every:4294967296
check_error "--plan: expected every:N with N an integer from 1 to 16, got 'every:4294967297'" \
  simulate --model "$work/tiny.json" --plan every:4294967297
echo '{"checkpoints": [], "edge_blocks": {"encoder": 3000, "decoder": 6000}}' >"$work/blocks.json"
check_error "$work/blocks.json: /edge_blocks/decoder: expected a positive integer of at most 1024 (actmem's limit on edge blocks), got 6000" \
  simulate --model "$work/tiny.json" --plan "$work/blocks.json" --timeline "$work/t.csv"
echo '{"checkpoints": [], "edge_blocks": {"encoder": 1024, "decoder": 1024}}' >"$work/blocks.json"
out=$("$actmem" simulate --model "$work/tiny.json" --plan "$work/blocks.json" --rollout 12 --timeline "$work/t.csv" 2>&1)
[ $? -eq 2 ] || fail "a timeline beyond the limit: $out"
[[ "$out" == "actmem: error: --timeline: the timeline would have more than 131072 rows"* ]] || fail "timeline: $out"
"$actmem" simulate --model "$work/tiny.json" --plan "$work/blocks.json" --rollout 1024 >/dev/null
rc=$?
[ $rc -le 1 ] || fail "the largest block counts at rollout 1024 exited $rc"
# The buffers live at the peak, at the largest step accepted (took 8 minutes:
# the live buffers were listed at every rise of the peak).
"$actmem" simulate --model graphcast --rollout 413 --peak-buffers 3 >/dev/null
[ $? -eq 1 ] || fail "--peak-buffers at rollout 413: expected exit 1 (does not fit)"
sed 's/"processor_steps": 4/"processor_steps": 256/' "$work/tiny.json" >"$work/steps.json"
check_error "$work/steps.json: /processor_steps: expected a positive integer of at most 16, got 256" \
  fit --model "$work/steps.json"
check_error_prefix "--resolution: expected a resolution in degrees of at least 0.25" mesh --resolution 0.05 --mesh-level 10
check_error "--mesh-level: expected a mesh level from 0 to 8, got 10" mesh --mesh-level 10
check_error_prefix "--rollout: the training step is too large to plan: model 'graphcast' at rollout 1024" \
  fit --rollout 1024
check_error_prefix "sweep: 14 devices × 20 batch sizes × 1 rollouts is 280 rows; expected at most 256" \
  sweep --model "$work/tiny.json" --batch 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20

# ---- output that cannot be written (was exit 0, silently)
"$actmem" fit --model "$work/tiny.json" >/dev/full 2>"$work/stderr"
[ $? -eq 2 ] || fail "fit >/dev/full: expected exit 2"
grep -q '^actmem: error: cannot write to standard output' "$work/stderr" || fail "/dev/full: $(cat "$work/stderr")"
"$actmem" fit --model "$work/tiny.json" >&- 2>"$work/stderr"
[ $? -eq 2 ] || fail "fit with stdout closed: expected exit 2"
grep -q '^actmem: error: cannot write to standard output: it is closed' "$work/stderr" ||
  fail "closed stdout: $(cat "$work/stderr")"

# ---- the command line: values as written, errors that name what was given
"$actmem" fit --model "$work/tiny.json" --batch 010 | grep -q 'batch 10,' || fail "--batch 010 is not batch 10"
check_error "--budget: expected a positive byte size such as 32GiB, 30GB or 512MiB, got ''" fit --budget ''
check_error "--memory: expected a positive byte size such as 32GiB, 30GB or 512MiB, got ''" fit --memory ''
check_error "--batch: expected an integer from 1 to 65536, got 9223372036854775808" fit --batch 9223372036854775808
check_error "--batch: expected an integer from 1 to 65536, got '0x10'" fit --batch 0x10
check_error "--devices: 'foo' is neither a catalog device nor a readable file; see 'actmem devices'" sweep --devices foo
check_error "--devices: expected a comma-separated list of device ids or files, got 'tpu-v4,'" sweep --devices tpu-v4,
check_error "fit: unexpected arguments 'a' 'b' 'c'; see 'actmem fit --help'" fit a b c
check_error "fit: unknown option '--x\\x1b[31mred\\x0anext'; see 'actmem fit --help'" fit $'--x\x1b[31mred\nnext'
check_error_prefix "--model: '\\x07" fit --model $'\a'
out=$("$actmem" report --model "$work/tiny.json" --svg "$work/"$'a\x1b[31mb.svg' 2>&1 >/dev/null)
[[ "$out" == "wrote $work/a\\x1b[31mb.svg ("* ]] || fail "report's note printed a raw escape: $out"

# ---- a plan file's budget: checked against the device it is applied to,
# named in the file or not (was "peak 84.78 GiB of 4194304.00 GiB budget: fits")
echo '{"checkpoints": [], "budget_bytes": 4503599627370496}' >"$work/budget.json"
budget_error="$work/budget.json: /budget_bytes: expected at most the memory_bytes of the device it is applied to (tpu-v4: 34359738368), got 4503599627370496"
check_error "$budget_error" simulate --plan "$work/budget.json" --model graphcast
check_error "$budget_error" simulate --plan "$work/budget.json" --model graphcast --json
check_error "$budget_error" report --plan "$work/budget.json" --model graphcast -o "$work/budget.html"
"$actmem" plan --model "$work/tiny.json" --device a100-80gb -o "$work/full-plan.json" 2>/dev/null
/usr/bin/python3 - "$work/full-plan.json" "$work/deviceless.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
del plan["device"]  # a100-80gb's budget, now on the default tpu-v4
json.dump(plan, open(sys.argv[2], "w"))
PY
check_error_prefix "$work/deviceless.json: /budget_bytes: expected at most the memory_bytes of the device it is applied to (tpu-v4: 34359738368), got " \
  simulate --plan "$work/deviceless.json"
"$actmem" simulate --plan "$work/deviceless.json" --device a100-80gb >/dev/null || fail "--device replaces the document's budget"

# ---- documents of millions of values: refused while read, in bounded memory
# (a 16 MiB plan of 5.6 million {} took 1.03 GB and 3 s)
/usr/bin/python3 -c 'import sys; sys.stdout.write("{\"checkpoints\": [" + ",".join(["{}"] * 5500000) + "]}")' >"$work/many.json"
/usr/bin/time -q -f '%M' -o "$work/rss" "$actmem" simulate --model "$work/tiny.json" --plan "$work/many.json" \
  2>"$work/stderr"
grep -q "^actmem: error: $work/many.json: /checkpoints/65534: more than 65536 values in one document" "$work/stderr" ||
  fail "many values: $(cat "$work/stderr")"
[ "$(cat "$work/rss")" -lt 150000 ] || fail "refusing 5.5 million values took $(cat "$work/rss") KB"
sed 's/"name": "tiny"/"name": "tiny", "description": [1, 2]/' "$work/tiny.json" >"$work/described.json"
check_error "$work/described.json: /description: expected a string, got [1,2]" fit --model "$work/described.json"

# ---- options a command does not read are refused (sweep --memory answered for the 32 GiB chip)
check_error "sweep: unknown option '--memory'; see 'actmem sweep --help'" sweep --devices tpu-v4 --memory 1GiB
check_error "sweep: unknown option '--device' (did you mean '--devices'?); see 'actmem sweep --help'" \
  sweep --device h200-141gb
check_error "--headroom: expected a share from 0% to 50% or a size such as 2GiB, got '0x10%'" \
  fit --model "$work/tiny.json" --headroom 0x10%

# ---- report: the catalog row of a device that the headroom leaves no memory
# says "does not fit" (was exit 2 naming tpu-v5e); a timeline too long to
# draw names the report (was --timeline, an option report does not have)
"$actmem" report --model "$work/tiny.json" --device h200-141gb --headroom 20GiB -o "$work/roomy.html" 2>/dev/null ||
  fail "report --headroom 20GiB exited $?"
/usr/bin/python3 - "$work/roomy.html" <<'PY' || fail "the catalog rows of small devices do not say 'does not fit'"
import json, re, sys
html = open(sys.argv[1]).read()
figures = json.loads(re.search(r'<script type="application/json" id="actmem-figures">(.*?)</script>', html).group(1))
rows = {row["device"]: row for row in figures["catalog"]}
assert rows["tpu-v5e"]["fits"] is False and rows["tpu-v5e"]["budget_bytes"] == 0, rows["tpu-v5e"]
assert rows["h200-141gb"]["fits"] is True, rows["h200-141gb"]
PY
check_error "report: it draws the step's timeline, and the timeline would have more than 131072 rows (one per op run); simulate fewer edge blocks or a shorter rollout" \
  report --model graphcast --rollout 99 -o "$work/long.html"

# ---- what reaches a terminal: one line, in the order it is stored
/usr/bin/python3 - "$work/tiny.json" "$work/rlo.json" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
model["name"] = "evil\u202eslmt"  # a right-to-left override: printed "evil" then "tmls" reversed
json.dump(model, open(sys.argv[2], "w"))
PY
check_error_prefix "$work/rlo.json: /name: expected a name of at most 256 printable characters on one line" \
  fit --model "$work/rlo.json"
rlo_file="$work/"$'model\xe2\x80\xa8next.json'  # a line separator; without a name, the model is named so
/usr/bin/python3 -c 'import json, sys; m = json.load(open(sys.argv[1])); del m["name"]; json.dump(m, open(sys.argv[2], "w"))' \
  "$work/tiny.json" "$rlo_file"
"$actmem" fit --model "$rlo_file" | head -1 | grep -q '^model model\\xe2\\x80\\xa8next (' ||
  fail "a line separator in a file name reached the terminal: $("$actmem" fit --model "$rlo_file" | head -1)"

# ---- a model PhysicsNeMo cannot train (1 processor step): its export says why (was exit 3 in plan and report)
sed 's/"processor_steps": 4/"processor_steps": 1/' "$work/tiny.json" >"$work/one-step.json"
"$actmem" plan --model "$work/one-step.json" --framework pytorch -o "$work/one-step-plan.json" 2>/dev/null ||
  fail "plan of a one-step model exited $?"
grep -q '"unsupported": "PhysicsNeMo' "$work/one-step-plan.json" || fail "the PhysicsNeMo export does not say why"
check_error "--export: physicsnemo: PhysicsNeMo's GraphCastNet needs at least 3 processor layers (it raises \"Expected at least 3 processor layers\"); this model has 1 processor steps" \
  plan --model "$work/one-step.json" --framework pytorch --export physicsnemo
"$actmem" report --model "$work/one-step.json" --framework pytorch -o "$work/one-step.html" --quiet ||
  fail "report of a one-step model exited $?"

# ---- no command: one error line that names the commands (was the usage on stdout)
check_error "expected a command: fit, plan, sweep, simulate, report, mesh, models, devices, rules; see 'actmem --help'"

finish

#!/usr/bin/env bash
# `actmem fit`, `plan`, `sweep` end to end: exit codes, the plan file against
# docs/plan.schema.json, `simulate --plan` reproducing `predicted` exactly,
# atomic writes. `bash plan.sh ACTMEM_BINARY SOURCE_DIR`.
source "$(dirname "$0")/lib.sh"

# fit: exit 0 when it fits, 1 when it does not (with the minimum and devices).
"$actmem" fit --model graphcast-small --device a100-80gb --framework pytorch >"$work/fit.txt"
[ $? -eq 0 ] || fail "graphcast-small on a100-80gb should fit: $(cat "$work/fit.txt")"
grep -q '^FITS: predicted peak' "$work/fit.txt" || fail "fit output: $(cat "$work/fit.txt")"
"$actmem" fit --model graphcast --device tpu-v4 --budget 2GiB >"$work/nofit.txt"
[ $? -eq 1 ] || fail "graphcast in 2 GiB should not fit"
grep -q '^DOES NOT FIT: the least memory any plan needs is' "$work/nofit.txt" || fail "nofit output: $(cat "$work/nofit.txt")"
grep -q 'catalog devices that fit as written:' "$work/nofit.txt" || fail "nofit lists no devices: $(cat "$work/nofit.txt")"
"$actmem" fit --model graphcast-small --device a100-80gb --json >"$work/fit.json" || fail "fit --json exited $?"

# --headroom: fit and plan work within the budget less the headroom (default
# 5% of it), say so, and say when the least plan would fit only by eating
# into it; a share above 50% or a headroom of the whole budget is exit 2.
small=(--model graphcast-small --device a100-80gb --framework pytorch)
"$actmem" fit "${small[@]}" --json >"$work/h5.json" || fail "fit (default headroom) exited $?"
"$actmem" fit "${small[@]}" --headroom 0 --json >"$work/h0.json" || fail "fit --headroom 0 exited $?"
"$actmem" fit "${small[@]}" --headroom 2GiB --json >"$work/h2.json" || fail "fit --headroom 2GiB exited $?"
/usr/bin/python3 - "$work/h5.json" "$work/h0.json" "$work/h2.json" <<'PY' || fail "fit --headroom figures"
import json, sys
h5, h0, h2 = (json.load(open(p)) for p in sys.argv[1:])
memory = 80 * 2**30
assert h0["headroom_bytes"] == 0 and h0["budget_bytes"] == memory, h0["budget_bytes"]
assert h5["headroom_bytes"] == memory // 20 and h5["budget_bytes"] == memory - memory // 20, h5["budget_bytes"]
assert h2["headroom_bytes"] == 2 * 2**30 and h2["budget_bytes"] == memory - 2 * 2**30
assert h5["peak_bytes"] <= h5["budget_bytes"] and h5["fits"]
PY
least=$("$actmem" fit "${small[@]}" --budget 1GiB --headroom 0 --json |
  /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["min_peak_bytes"])')
memory=$((least + least / 50))  # 2% above the least peak: fits, but not with 5% kept free
"$actmem" fit "${small[@]}" --budget "${memory}B" --headroom 0 >/dev/null || fail "fit in ${memory} B without headroom"
"$actmem" fit "${small[@]}" --budget "${memory}B" >"$work/squeezed.txt"
[ $? -eq 1 ] || fail "fit in ${memory} B with 5% headroom should not fit: $(cat "$work/squeezed.txt")"
grep -q '^headroom: .* (5%) of the .* budget kept free (--headroom); plans must fit in ' "$work/squeezed.txt" &&
  grep -q 'it would fit the whole .* budget, eating into the headroom' "$work/squeezed.txt" ||
  fail "fit does not explain the headroom: $(cat "$work/squeezed.txt")"
"$actmem" plan "${small[@]}" --budget "${memory}B" -o "$work/squeezed.json" 2>"$work/squeezed.err"
[ $? -eq 1 ] && [ ! -e "$work/squeezed.json" ] || fail "plan within the headroom wrote a plan"
grep -q 'after .* kept free by --headroom); no plan written' "$work/squeezed.err" || fail "plan: $(cat "$work/squeezed.err")"
check_error "--headroom: expected a share from 0% to 50% or a size such as 2GiB, got '51%'" fit "${small[@]}" --headroom 51%
check_error "--headroom: expected a positive byte size such as 32GiB, 30GB or 512MiB, got 'lots'" plan "${small[@]}" --headroom lots -o -
check_error "--headroom: 90.00 GiB leaves nothing of the 80.00 GiB budget" fit "${small[@]}" --headroom 90GiB

# plan: every plan written validates against the schema and re-simulates to
# exactly its predicted figures.
# PhysicsNeMo's implementation with its concat_trick: the fields are in the
# plan file's model, its fingerprint and the schema.
cat >"$work/physicsnemo.json" <<'JSON'
{"name": "tiny-physicsnemo", "architecture": "graphcast", "implementation": "physicsnemo", "concat_trick": true,
 "grid_nodes": 2000, "mesh_nodes": 500, "grid2mesh_edges": 3000, "mesh_edges": 3000, "mesh2grid_edges": 6000,
 "latent_size": 64, "mlp_hidden_layers": 1, "processor_steps": 4, "grid_input_features": 20,
 "mesh_input_features": 20, "edge_features": 4, "output_features": 10}
JSON
i=0
for args in "--model $work/physicsnemo.json --device a100-80gb --framework pytorch --budget 1.05GiB --headroom 0" \
            "--model graphcast --device tpu-v4" \
            "--model graphcast-small --device rtx4090-24gb --framework pytorch" \
            "--model graphcast-operational --device h100-80gb --rollout 4" \
            "--model graphcast-small --device v100-16gb --dtype float32 --batch 2" \
            "--model graphcast-small --device tpu-v4 --budget 3.74GiB --nested-regions"; do
  i=$((i + 1))
  # shellcheck disable=SC2086
  "$actmem" plan $args -o "$work/plan$i.json" 2>/dev/null
  status=$?
  [ "$status" -le 1 ] || fail "plan $args exited $status"
  [ "$status" -eq 0 ] || continue
  "$actmem" simulate --plan "$work/plan$i.json" --json >"$work/sim$i.json" || fail "simulate --plan plan$i.json: $?"
  /usr/bin/python3 - "$source_dir/docs/plan.schema.json" "$work/plan$i.json" "$work/sim$i.json" <<'PY' || fail "plan$i.json ($args)"
import json, sys
import jsonschema
schema, plan, sim = (json.load(open(p)) for p in sys.argv[1:])
jsonschema.validate(plan, schema)
for key, value in plan["predicted"].items():
    assert sim[key] == value, (key, sim[key], value)
PY
done
[ -z "$(ls -A "$work" | grep '^\.plan')" ] || fail "temporary plan files left behind"
grep -q '"concat_trick": true' "$work/plan1.json" && grep -q '"implementation": "physicsnemo"' "$work/plan1.json" ||
  fail "the PhysicsNeMo plan file lost its implementation"

# --nested-regions widens the plan space: it needs less memory (3.69 GiB
# against 3.79 GiB), and the plan at 3.74 GiB above has inner regions.
grep -q '"inner"' "$work/plan$i.json" || fail "the plan at 3.74 GiB has no inner regions"
least() { sed -n 's/^DOES NOT FIT: the least memory any plan needs is \([0-9.]*\) GiB.*/\1/p' "$1"; }
"$actmem" fit --model graphcast-small --device tpu-v4 --budget 1GiB >"$work/flat.txt"
"$actmem" fit --model graphcast-small --device tpu-v4 --budget 1GiB --nested-regions >"$work/nested.txt"
flat=$(least "$work/flat.txt")
nested=$(least "$work/nested.txt")
[ -n "$flat" ] && [ -n "$nested" ] || fail "fit in 1 GiB: $(cat "$work/flat.txt" "$work/nested.txt")"
/usr/bin/python3 -c "import sys; sys.exit(0 if $nested < $flat else 1)" || fail "nested needs $nested GiB, flat $flat GiB"
grep -q '^hint: --nested-regions' "$work/flat.txt" || fail "no hint to try --nested-regions: $(cat "$work/flat.txt")"
! grep -q '^hint:' "$work/nested.txt" || fail "hint given with --nested-regions on"

# -o - writes the plan to stdout; a plan that does not fit writes nothing.
"$actmem" plan --model graphcast-small --device a100-80gb -o - | /usr/bin/python3 -c 'import json,sys; assert json.load(sys.stdin)["format"] == "actmem.plan"' \
  || fail "plan -o - is not a plan"
"$actmem" plan --model graphcast --device tpu-v4 --budget 1GiB -o "$work/none.json" 2>/dev/null
[ $? -eq 1 ] || fail "plan in 1 GiB should exit 1"
[ ! -e "$work/none.json" ] || fail "a plan that does not fit was written"

# --export TRAINER prints only that trainer's text, in the form it reads.
"$actmem" plan --model graphcast --device a100-80gb --framework pytorch --export anemoi >"$work/anemoi.yaml" ||
  fail "plan --export anemoi exited $?"
/usr/bin/python3 - "$work/anemoi.yaml" <<'PY' || fail "anemoi export: $(cat "$work/anemoi.yaml")"
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
assert list(config) == ["model"], config
for part in ("encoder", "processor", "decoder"):
    assert set(config["model"][part]) == {"gradient_checkpointing", "num_chunks"}, config
assert config["model"]["encoder"]["num_chunks"] == config["model"]["decoder"]["num_chunks"] == 1, config
PY
"$actmem" plan --model graphcast-small --device a100-80gb --framework pytorch --rollout 4 --budget 6GiB \
  --export physicsnemo >"$work/physicsnemo.yaml" || fail "plan --export physicsnemo exited $?"
/usr/bin/python3 - "$work/physicsnemo.yaml" <<'PY' || fail "physicsnemo export: $(cat "$work/physicsnemo.yaml")"
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
for key in ("checkpoint_encoder", "checkpoint_processor", "checkpoint_decoder", "segments",
            "force_single_checkpoint_finetune", "checkpoint_encoder_finetune",
            "checkpoint_processor_finetune", "checkpoint_decoder_finetune"):
    assert key in config, (key, config)
PY
"$actmem" plan --model graphcast-small --device a100-80gb --framework pytorch --rollout 4 --export deepmind \
  >"$work/deepmind.py" || fail "plan --export deepmind exited $?"
grep -qx 'predictor = autoregressive.Predictor(predictor, gradient_checkpointing=\(True\|False\))' "$work/deepmind.py" ||
  fail "deepmind export: $(cat "$work/deepmind.py")"
check_error "--export: expected one of pytorch, jax, physicsnemo, anemoi, deepmind, deepmind_deep_gnn, got 'anemio' (did you mean 'anemoi'?)" \
  plan --model graphcast-small --export anemio
check_error "plan: expected -o FILE (or -o -) or --export TRAINER" plan --model graphcast-small

# GraphCast on an A100-80GB under PyTorch: actmem's plan blocks edges, which
# anemoi's GNN mapper cannot (its chunks share one checkpoint).
# The anemoi export says so (not exact), and its predicted is what
# simulating the plan anemoi runs gives on anemoi's own implementation of
# the model, not on DeepMind's op sequence.
"$actmem" plan --model graphcast --device a100-80gb --framework pytorch -o "$work/a100.json" 2>/dev/null ||
  fail "plan on a100-80gb exited $?"
/usr/bin/python3 - "$work/a100.json" "$work/anemoi-plan.json" "$work/anemoi-model.json" <<'PY' || fail "anemoi export on a100-80gb"
import json, sys
doc = json.load(open(sys.argv[1]))
anemoi = doc["exports"]["anemoi"]
assert doc["predicted"]["fits"] and doc["edge_blocks"], doc["edge_blocks"]
assert not anemoi["exact"] and anemoi["implementation"] == "anemoi", anemoi
assert not anemoi["plan"].get("edge_blocks"), anemoi["plan"]
json.dump(anemoi["plan"], open(sys.argv[2], "w"))
model = {k: v for k, v in doc["model"].items() if k not in ("fingerprint", "parameter_count")}
json.dump(dict(model, implementation="anemoi"), open(sys.argv[3], "w"))
PY
# The plan file's budget: the A100's memory less plan's headroom.
budget=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["budget_bytes"])' "$work/a100.json")
for implementation in anemoi deepmind; do
  model=$([ $implementation = anemoi ] && echo "$work/anemoi-model.json" || echo graphcast)
  "$actmem" simulate --model "$model" --device a100-80gb --budget "${budget}B" --framework pytorch \
    --plan "$work/anemoi-plan.json" --json \
    >"$work/anemoi-sim-$implementation.json" || [ $? -eq 1 ] || fail "simulate the anemoi plan ($implementation)"
done
/usr/bin/python3 - "$work/a100.json" "$work/anemoi-sim-anemoi.json" "$work/anemoi-sim-deepmind.json" <<'PY' ||
import json, sys
doc, own, deepmind = (json.load(open(p)) for p in sys.argv[1:])
predicted = doc["exports"]["anemoi"]["predicted"]
assert predicted["peak_bytes"] == own["peak_bytes"] and predicted["fits"] == own["fits"], (predicted, own["peak_bytes"])
# anemoi's scatter keeps no [E, L] sources: less than DeepMind's sequence under the same regions.
assert own["peak_bytes"] < deepmind["peak_bytes"], (own["peak_bytes"], deepmind["peak_bytes"])
PY
  fail "anemoi predicted is not its plan's simulation on anemoi's implementation"

# sweep: one row per device x batch x rollout.
rows=$("$actmem" sweep --model graphcast-small --devices a100-80gb,tpu-v4 --batch 1,2 --rollout 1 --json |
       /usr/bin/python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')
[ "$rows" = 4 ] || fail "sweep rows: $rows"
check_error "--batch: expected a comma-separated list of positive integers, got '1,x'" sweep --batch 1,x

finish

#!/usr/bin/env bash
# Bad input gets one clear error line naming the source, the field and what
# was expected, and exit code 2: `bash errors.sh ACTMEM_BINARY SOURCE_DIR`.
source "$(dirname "$0")/lib.sh"

sed 's/"grid_nodes": 2000/"grid_nodes": -5/' "$work/tiny.json" >"$work/negative.json"
sed 's/"architecture": "graphcast"/"architecture": "graphcast", "implementation": "anemio"/' "$work/tiny.json" >"$work/implementation.json"
sed 's/"architecture": "graphcast"/"architecture": "graphcast", "concat_trick": true/' "$work/tiny.json" >"$work/trick.json"
printf '{"name": "broken",\n  "grid_nodes": 12,,\n}\n' >"$work/broken.json"
sed 's/"output_features": 10/"output_features": 10, "parameter_count": 221899/' "$work/tiny.json" >"$work/parameters.json"
sed 's/"output_features": 10/"output_features": 10, "parameter_count": 221898/' "$work/tiny.json" >"$work/parameters_ok.json"
echo '{"checkpoints": [{"from": "encoder", "to": "processor.1"}, {"from": "processor.0", "to": "decoder"}]}' >"$work/overlap.json"
echo '{"checkpoints": [], "edge_blocks": {"encoder": 0}}' >"$work/zero.json"
echo '{"checkpoints": [{"from": "procesor.1", "to": "decoder"}]}' >"$work/unknown.json"

check_error "unknown command 'fitt' (did you mean 'fit'?); see 'actmem --help'" fitt
check_error "simulate: unknown option '--bugdet' (did you mean '--budget'?); see 'actmem simulate --help'" \
  simulate --bugdet 3GiB
check_error "--model: 'graphcats' is neither a preset (graphcast, graphcast-small, graphcast-operational) nor a readable file (did you mean 'graphcast'?)" \
  simulate --model graphcats
check_error "$work/negative.json: /grid_nodes: expected a positive integer, got -5" simulate --model "$work/negative.json"
check_error "$work/implementation.json: /implementation: expected one of \"deepmind\", \"physicsnemo\", \"anemoi\", got \"anemio\" (did you mean 'anemoi'?)" \
  simulate --model "$work/implementation.json"
check_error "$work/trick.json: /concat_trick: concat_trick is PhysicsNeMo's knob: expected implementation \"physicsnemo\" with it, got \"deepmind\"" \
  simulate --model "$work/trick.json"
# A model file's parameter_count, if given, is the one its architecture's
# builder declares (221,898 for the tiny model, DeepMind's implementation).
check_error "$work/parameters.json: /parameter_count: expected 221898 for the model described here, got 221899" \
  simulate --model "$work/parameters.json"
"$actmem" simulate --model "$work/parameters_ok.json" >/dev/null 2>"$work/stderr" ||
  fail "the right parameter_count: $(cat "$work/stderr")"
check_error "$work/broken.json:2:20: invalid JSON: syntax error while parsing object key - unexpected ','; expected string literal" \
  simulate --model "$work/broken.json"
check_error "--budget: expected a positive byte size such as 32GiB, 30GB or 512MiB, got 'lots'" \
  simulate --model "$work/tiny.json" --budget lots
check_error "--device: 'tpu-v3' is neither a catalog device nor a readable file (did you mean 'tpu-v4'?); see 'actmem devices'" \
  simulate --model "$work/tiny.json" --device tpu-v3
check_error "--framework: expected one of pytorch, jax, got 'tensorflow'" simulate --framework tensorflow
check_error "--batch: expected an integer from 1 to 65536, got 0" simulate --model "$work/tiny.json" --batch 0
check_error "$work/overlap.json: /checkpoints/1: region processor.0..decoder overlaps region encoder..processor.1" \
  simulate --model "$work/tiny.json" --plan "$work/overlap.json"
check_error "$work/zero.json: /edge_blocks/encoder: expected a positive integer, got 0" \
  simulate --model "$work/tiny.json" --plan "$work/zero.json"
check_error "$work/unknown.json: /checkpoints/0/from: unknown stage 'procesor.1' (did you mean 'processor.1'?); stages are encoder, mesh_edge_embed, processor.0..processor.3, decoder" \
  simulate --model "$work/tiny.json" --plan "$work/unknown.json"
check_error "--plan: 'sometimes' is not a plan file or a built-in plan (none, full, every:K, deepmind, deepmind:B)" \
  simulate --model "$work/tiny.json" --plan sometimes

# A plan whose model fingerprint does not match its model is refused.
python3 - "$work/tiny.json" "$work/foreign.json" <<'PY' || fail "could not write foreign plan"
import json, sys
model = json.load(open(sys.argv[1]))
model["fingerprint"] = "0000000000000000"
json.dump({"model": model, "checkpoints": []}, open(sys.argv[2], "w"))
PY
"$actmem" simulate --plan "$work/foreign.json" 2>"$work/stderr" >/dev/null
[ $? -eq 2 ] || fail "edited fingerprint: expected exit 2"
grep -q "/model/fingerprint: expected" "$work/stderr" || fail "edited fingerprint: $(cat "$work/stderr")"

finish

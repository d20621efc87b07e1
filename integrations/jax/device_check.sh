#!/usr/bin/env bash
# XLA:GPU's memory figures for the reference JAX GraphCast under actmem's
# plans, on a machine with a GPU and JAX's CUDA backend (docs/validation-jax.md,
# "On a GPU"). Each plan file in DIR (default .gpucheck), named
# MODEL-PLAN-rT.plan.json, runs in its own process (gpu_check.py); one JSON
# line each goes to OUT (default gpu_check.jsonl), a failure as {"case", "error"}.
#   integrations/jax/device_check.sh [DIR [OUT]]
# Make the plans first, where actmem is built (`actmem simulate --framework jax
# --device h200-141gb --model M --plan P --json`, its "plan"); MODEL is a preset
# or a file in integrations/jax/models.
set -uo pipefail
cd "$(dirname "$0")/../.."
dir="${1:-.gpucheck}"
out="${2:-gpu_check.jsonl}"
python="${PYTHON:-python3}"
platform="${PLATFORM:-cuda}"  # cpu: a dry run of the script itself
export PYTHONUNBUFFERED=1
: >"$out"
for plan in "$dir"/*.plan.json; do
  case_name=$(basename "$plan" .plan.json)
  rollout=${case_name##*-r}
  model=${case_name%-*-r*}
  [ -f "integrations/jax/models/$model.json" ] && model="integrations/jax/models/$model.json"
  echo "== $case_name (model $model, rollout $rollout)" >&2
  if line=$(timeout "${CASE_TIMEOUT:-300}" "$python" integrations/jax/gpu_check.py --plan "$plan" --model "$model" \
    --rollout "$rollout" --platform "$platform" 2>"$out.err"); then
    line="{\"case\": \"$case_name\", ${line#\{}"
  else
    line=$(printf '{"case": "%s", "error": %s}' "$case_name" \
      "$("$python" -c 'import json,sys; print(json.dumps(sys.stdin.read()[-2000:]))' <"$out.err")")
  fi
  echo "$line" | tee -a "$out" >&2
done
rm -f "$out.err"

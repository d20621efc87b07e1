#!/usr/bin/env bash
# Measures, on a machine with one CUDA GPU, what actmem predicts: the
# reference PyTorch GraphCast under the caching allocator
# (integrations/pytorch/measure_cuda.py, every case of validate.py's
# CUDA_CASES) and the reference JAX GraphCast under XLA:GPU
# (integrations/jax/device_check.sh, each plan file in PLANS/small, then
# PLANS/big). Nothing is predicted there: compare here, where actmem is built
# (docs/validation.md and docs/validation-jax.md, "On a GPU").
#   scripts/gpu-check.sh [PLANS [OUT]]      (defaults .gpucheck, gpu-check)
# Writes OUT/torch_cuda.jsonl, OUT/jax_small.jsonl, OUT/jax_big.jsonl and
# their .err logs; each part has its own time limit (TORCH_SECONDS,
# JAX_SMALL_SECONDS, JAX_BIG_SECONDS) so one slow part cannot starve the rest;
# TORCH_ONLY runs only the PyTorch cases whose key contains it.
set -uo pipefail
cd "$(dirname "$0")/.."
plans="${1:-.gpucheck}"
out="${2:-gpu-check}"
python="${PYTHON:-python3}"
export PYTHON="$python" PYTHONUNBUFFERED=1
mkdir -p "$out"
nvidia-smi -L 2>&1 | tee "$out/device.txt"
"$python" -c 'import jax, torch; print("jax", jax.__version__, "torch", torch.__version__, torch.version.cuda)' \
  2>&1 | tee -a "$out/device.txt"
(cd integrations/pytorch && timeout "${TORCH_SECONDS:-150}" "$python" measure_cuda.py --only "${TORCH_ONLY:-}") \
  >"$out/torch_cuda.jsonl" 2>"$out/torch_cuda.err"
echo "torch: exit $?, $(wc -l <"$out/torch_cuda.jsonl") cases" | tee -a "$out/device.txt"
for part in small big; do
  compgen -G "$plans/$part/*.plan.json" >/dev/null || continue
  limit_var="JAX_${part^^}_SECONDS"
  timeout "${!limit_var:-200}" integrations/jax/device_check.sh "$plans/$part" "$out/jax_$part.jsonl" \
    2>"$out/jax_$part.err"
  echo "jax $part: exit $?, $(wc -l <"$out/jax_$part.jsonl") cases" | tee -a "$out/device.txt"
done

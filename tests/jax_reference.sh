#!/usr/bin/env bash
# Runs integrations/jax's pytest suite (the reference JAX GraphCast on
# XLA:CPU and a deviceless TPU v4) and checks actmem's predictions against
# the XLA:TPU figures stored by integrations/jax/validate.py (the reference's
# step) and validate_deepmind.py (DeepMind's), for CTest.
#   tests/jax_reference.sh SOURCE_DIR ACTMEM_BIN
# Exit 77 (skipped) when the JAX environment (scripts/install-jax.sh) is
# missing, unless ACTMEM_REQUIRE_JAX is set, as CI does.
set -euo pipefail
source_dir="$1"
python="${ACTMEM_JAX_VENV:-$source_dir/.venv-jax}/bin/python"
source "$source_dir/tests/lib/require_venv.sh"
require_venv jax_reference "$python" ACTMEM_REQUIRE_JAX scripts/install-jax.sh
export ACTMEM_BIN="$2" PYTHONDONTWRITEBYTECODE=1
# The XLA:TPU compiles of the suite take about 10 CPU-minutes: in CI only
# the XLA:CPU ones run (ACTMEM_JAX_TPU_TESTS=1 runs them all).
selection=()
[[ -n "${ACTMEM_JAX_TPU_TESTS:-}" ]] || selection=(-k "not tpu-v4 and not lowers_xla_temp")
"$python" -m pytest -q -p no:cacheprovider "${selection[@]}" "$source_dir/integrations/jax"
"$python" "$source_dir/integrations/jax/validate.py" --stored
"$python" "$source_dir/integrations/jax/validate_deepmind.py" --stored

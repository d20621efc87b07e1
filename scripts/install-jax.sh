#!/usr/bin/env bash
# Creates the Python virtual environment that integrations/jax runs in, at
# $ACTMEM_JAX_VENV (default: .venv-jax at the repository root), with pinned
# JAX for TPU (jax, jaxlib, libtpu: deviceless TPU v4 compiles and XLA:CPU)
# and pytest. Idempotent: when the environment already holds exactly these
# pins (its stamp file says so) it returns at once and prints nothing.
# Needs Python 3.11+ with the venv module (Debian: python3-venv) and PyPI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib/venv.sh"
source "$root/scripts/lib/jax-pins.sh"
venv="${ACTMEM_JAX_VENV:-$root/.venv-jax}"
python="${ACTMEM_JAX_PYTHON:-python3}"

pins=("${jax_pins[@]}" "pytest==9.2.0")
wanted="$(printf '%s\n' "${pins[@]}")"
venv_is_current "$venv" "$wanted" && exit 0

venv_install install-jax "$python" "$venv" "${pins[@]}"
echo "install-jax: done; run integrations/jax with $venv/bin/python"

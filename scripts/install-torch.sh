#!/usr/bin/env bash
# Creates the Python virtual environment that the trainer tests and
# integrations/trainers run in, at $ACTMEM_TORCH_VENV (default: .venv-torch at
# the repository root), with pinned PyTorch 2.x, NVIDIA PhysicsNeMo, ECMWF
# anemoi-models, PyTorch Geometric and pytest. Idempotent: when the
# environment already holds exactly these pins (its stamp file says so) it
# returns at once and prints nothing.
#
# PyPI's torch for Linux brings the CUDA libraries: about 4.5 GB to download
# and 7.7 GB installed (measured: docs/trainer-exports.md, "The trainers'
# environment"). Needs Python 3.11+ with the venv module (Debian:
# python3-venv) and PyPI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${ACTMEM_TORCH_VENV:-$root/.venv-torch}"
python="${ACTMEM_TORCH_PYTHON:-python3}"

# anemoi-models 0.19.0 needs torch < 2.11 and nvidia-physicsnemo 2.2.2 needs
# torch >= 2.10: torch 2.10.0 is the one both take. The rest is what pip
# resolved them to, pinned where it matters to the tests.
pins=(
  "torch==2.10.0" "nvidia-physicsnemo==2.2.2" "anemoi-models==0.19.0" "anemoi-utils==0.5.14"
  "anemoi-graphs==0.9.8" "torch-geometric==2.8.1" "hydra-core==1.3.8" "omegaconf==2.3.1"
  "numpy==2.4.6" "pytest==9.2.0"
)
stamp="$venv/.actmem-pins"
wanted="$(printf '%s\n' "${pins[@]}")"

if [[ -x "$venv/bin/python" && -f "$stamp" && "$(<"$stamp")" == "$wanted" ]]; then
  exit 0
fi

if ! "$python" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "install-torch: error: '$python' must be Python 3.11+ with the venv and ensurepip modules" \
       "(Debian: apt-get install python3-venv)" >&2
  exit 2
fi

echo "install-torch: creating $venv (torch 2.10.0, nvidia-physicsnemo 2.2.2, anemoi-models 0.19.0; ~4.5 GB download)"
rm -f "$stamp"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
printf '%s\n' "$wanted" >"$stamp"
echo "install-torch: done; run integrations/trainers with $venv/bin/python"

#!/usr/bin/env bash
# Creates the Python virtual environment that the trainer tests and
# integrations/trainers run in, at $ACTMEM_TORCH_VENV (default:
# ~/.cache/actmem/venv-torch, shared by every checkout: it is 7.7 GB), with
# pinned PyTorch 2.x, NVIDIA PhysicsNeMo, ECMWF
# anemoi-models, PyTorch Geometric and pytest. Idempotent: when the
# environment already holds exactly these pins (its stamp file says so) it
# returns at once and prints nothing.
#
# PyPI's torch for Linux brings the CUDA libraries: about 4.5 GB to download
# and 7.7 GB installed, 7.4 minutes here. PhysicsNeMo's GraphCastNet builds
# its graphs with PyTorch Geometric only when torch-sparse and torch-scatter
# are there, and PyPI has them as source only: they are compiled once (59 and
# 37 minutes here, on 2 busy cores) into the
# wheel cache $ACTMEM_WHEEL_CACHE (default ~/.cache/actmem/wheels) and taken
# from there afterwards (docs/trainer-exports.md, "The trainers'
# environment"). Needs Python 3.11+ with the venv module (Debian:
# python3-venv), a C++ compiler and PyPI.
set -euo pipefail
source "$(dirname "$0")/lib/venv.sh"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/actmem"
venv="${ACTMEM_TORCH_VENV:-$cache/venv-torch}"
python="${ACTMEM_TORCH_PYTHON:-python3}"

# anemoi-models 0.19.0 needs torch < 2.11 and nvidia-physicsnemo 2.2.2 needs
# torch >= 2.10: torch 2.10.0 is the one both take. The rest is what pip
# resolved them to, pinned where it matters to the tests.
pins=(
  "torch==2.10.0" "nvidia-physicsnemo==2.2.2" "anemoi-models==0.19.0" "anemoi-utils==0.5.14"
  "anemoi-graphs==0.9.8" "torch-geometric==2.8.1" "hydra-core==1.3.8" "omegaconf==2.3.1"
  "numpy==2.4.6" "scipy==1.17.1" "pytest==9.2.0" "setuptools==65.5.0" "wheel==0.48.0"
)
# PyG's compiled extensions, on PyPI as source only: built against the torch above.
built=("torch-sparse==0.6.18" "torch-scatter==2.1.2")
wheels="${ACTMEM_WHEEL_CACHE:-$cache/wheels}"
wanted="$(printf '%s\n' "${pins[@]}" "${built[@]}")"
venv_is_current "$venv" "$wanted" && exit 0

venv_create install-torch "$python" "$venv"
echo "install-torch: installing into $venv: torch 2.10.0, nvidia-physicsnemo 2.2.2, anemoi-models 0.19.0, ${built[*]}; ~4.5 GB download"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}"
mkdir -p "$wheels"
"$venv/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-deps --no-build-isolation \
  --find-links "$wheels" -w "$wheels" "${built[@]}"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps --find-links "$wheels" "${built[@]}"
venv_stamp "$venv" "$wanted"
echo "install-torch: done; run integrations/trainers with $venv/bin/python"

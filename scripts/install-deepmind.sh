#!/usr/bin/env bash
# Creates the Python virtual environment that integrations/jax/deepmind_step.py
# runs in, at $ACTMEM_DEEPMIND_VENV (default: .venv-deepmind at the repository
# root): install-jax.sh's JAX, jaxlib and libtpu, and the packages DeepMind's
# GraphCast code imports (Haiku, jraph, chex, xarray, trimesh, ...), pinned.
# DeepMind's code itself is not on PyPI: deepmind_step.py takes checkouts of
# google-deepmind/graphcast and google-deepmind/xarray_jax by path.
# Idempotent: when the environment already holds exactly these pins (its
# stamp file says so) it returns at once and prints nothing.
# Needs Python 3.11+ with the venv module (Debian: python3-venv) and PyPI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib/venv.sh"
source "$root/scripts/lib/jax-pins.sh"
venv="${ACTMEM_DEEPMIND_VENV:-$root/.venv-deepmind}"
python="${ACTMEM_DEEPMIND_PYTHON:-python3}"

# install-jax.sh's JAX, then what DeepMind's weathernext/ imports for
# GraphCast, as resolved on 2026-12-05 (jraph has only development releases).
pins=(
  "${jax_pins[@]}"
  "dm-haiku==0.0.17" "jmp==0.0.4" "jraph==0.0.6.dev0" "chex==0.1.92" "dm-tree==0.1.10" "absl-py==2.5.1"
  "toolz==1.2.0" "wrapt==2.5.2" "attrs==26.1.0" "tabulate==0.10.0" "typing_extensions==4.16.0"
  "xarray==2026.2.0" "pandas==3.1.1" "python-dateutil==4.0.0" "tzdata==2026.6" "packaging==26.4"
  "trimesh==5.2.0" "rtree==1.4.1"
)
wanted="$(printf '%s\n' "${pins[@]}")"
venv_is_current "$venv" "$wanted" && exit 0

venv_install install-deepmind "$python" "$venv" "${pins[@]}"
echo "install-deepmind: done; run integrations/jax/deepmind_step.py with $venv/bin/python"

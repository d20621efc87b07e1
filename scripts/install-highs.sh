#!/usr/bin/env bash
# Creates the Python virtual environment of the ILP agreement check
# (tests/ilp, docs/solver.md "Independent optimum: an ILP") at
# $ACTMEM_HIGHS_VENV (default: .venv-highs at the repository root), with
# pinned HiGHS (highspy) and the numpy it needs. Idempotent: when the
# environment already holds exactly these pins (its stamp file says so) it
# returns at once and prints nothing. Needs Python 3.11+ with the venv
# module (Debian: python3-venv) and PyPI; about 30 MB.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/lib/venv.sh"
venv="${ACTMEM_HIGHS_VENV:-$root/.venv-highs}"
python="${ACTMEM_HIGHS_PYTHON:-python3}"

# highspy 1.16.0 (HiGHS 1.16.0); numpy is what it resolved to.
pins=("highspy==1.16.0" "numpy==2.4.6")
wanted="$(printf '%s\n' "${pins[@]}")"
venv_is_current "$venv" "$wanted" && exit 0

venv_install install-highs "$python" "$venv" "${pins[@]}"
echo "install-highs: done"

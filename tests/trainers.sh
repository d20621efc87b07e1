#!/usr/bin/env bash
# Runs integrations/trainers' pytest suite for CTest: actmem's PhysicsNeMo
# and anemoi exports loaded into the trainers' own model classes, the
# checkpoints they run compared with the exports' plans; and actmem's
# predictions against the trainers' measured memory (validate.py --stored
# over every stored case, two small cases measured afresh:
# docs/validation-trainers.md).
#   tests/trainers.sh SOURCE_DIR ACTMEM_BIN
# Exit 77 (skipped) when the trainers' environment (scripts/install-torch.sh)
# is missing, unless ACTMEM_REQUIRE_TRAINERS is set. A broken trainer package
# is one line naming it and its version (integrations/trainers/trainer_packages.py).
set -euo pipefail
source_dir="$1"
venv="${ACTMEM_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/actmem/venv-torch}"
python="$venv/bin/python"
source "$source_dir/tests/lib/require_venv.sh"
# The stamp is written last: without it the environment is absent or half made.
require_venv trainers "$python" ACTMEM_REQUIRE_TRAINERS scripts/install-torch.sh "$venv/.actmem-pins"
export ACTMEM_BIN="$2" PYTHONDONTWRITEBYTECODE=1
"$python" "$source_dir/integrations/trainers/trainer_packages.py"
"$python" -m pytest -q -p no:cacheprovider "$source_dir/integrations/trainers"

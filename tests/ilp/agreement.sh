#!/usr/bin/env bash
# The ILP agreement check for CTest (tests/ilp/agreement.py):
#   tests/ilp/agreement.sh SOURCE_DIR ILP_INSTANCES_BIN [agreement.py options]
# Exit 77 (skipped) when the HiGHS environment (scripts/install-highs.sh)
# is missing, unless ACTMEM_REQUIRE_HIGHS is set, as CI does.
set -euo pipefail
source_dir="$1"
tool="$2"
shift 2
python="${ACTMEM_HIGHS_VENV:-$source_dir/.venv-highs}/bin/python"
source "$source_dir/tests/lib/require_venv.sh"
require_venv "ilp agreement" "$python" ACTMEM_REQUIRE_HIGHS scripts/install-highs.sh
PYTHONDONTWRITEBYTECODE=1 exec "$python" "$source_dir/tests/ilp/agreement.py" --tool "$tool" "$@"

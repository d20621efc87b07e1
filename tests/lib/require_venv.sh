# Sourced by the CTest wrappers whose check runs in one of the project's
# virtual environments (tests/jax_reference.sh, tests/trainers.sh,
# tests/ilp/agreement.sh):
#   require_venv CHECK PYTHON REQUIRE_VARIABLE INSTALL_SCRIPT [STAMP]
# Returns when PYTHON is executable (and STAMP, the file an install script
# writes last, exists). Otherwise the check cannot run: exit 1 when the
# environment variable named REQUIRE_VARIABLE is set (CI: it must run), else
# exit 77, which CTest counts as skipped (SKIP_RETURN_CODE).
require_venv() {
  local check="$1" python="$2" require_variable="$3" install="$4" stamp="${5:-}"
  [[ -x "$python" && (-z "$stamp" || -f "$stamp") ]] && return 0
  if [[ -n "${!require_variable:-}" ]]; then
    echo "actmem: error: $check: ${stamp:-$python} missing: run $install" >&2
    exit 1
  fi
  echo "$check: skipped (no environment: $install; $require_variable=1 makes this a failure)"
  exit 77
}

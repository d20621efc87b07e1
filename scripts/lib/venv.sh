# Pinned Python virtual environments for the install-*.sh scripts (sourced).
# An environment is complete when its stamp file, written last, lists
# exactly the pins asked for; anything else is remade.

# venv_is_current VENV WANTED: VENV's stamp holds WANTED (the pins, one a line).
venv_is_current() {
  [[ -x "$1/bin/python" && -f "$1/.actmem-pins" && "$(<"$1/.actmem-pins")" == "$2" ]]
}

# venv_create TOOL PYTHON VENV: a fresh VENV from PYTHON, its stamp removed
# until venv_stamp; exit 2 with one line naming TOOL unless PYTHON is 3.11+
# with the venv and ensurepip modules.
venv_create() {
  if ! "$2" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "$1: error: '$2' must be Python 3.11+ with the venv and ensurepip modules" \
         "(Debian: apt-get install python3-venv)" >&2
    exit 2
  fi
  rm -f "$3/.actmem-pins"
  "$2" -m venv "$3"
}

# venv_stamp VENV WANTED: marks VENV complete.
venv_stamp() {
  printf '%s\n' "$2" >"$1/.actmem-pins"
}

# venv_install TOOL PYTHON VENV PIN...: a fresh VENV (venv_create) with
# exactly PIN... from PyPI, then stamped complete.
venv_install() {
  local tool="$1" python="$2" venv="$3"
  shift 3
  venv_create "$tool" "$python" "$venv"
  echo "$tool: installing $1 into $venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
  venv_stamp "$venv" "$(printf '%s\n' "$@")"
}

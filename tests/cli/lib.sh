# Shared by the end-to-end CLI tests (sourced, not run): `check_error`,
# `check_error_prefix`, `fail`, and a temporary folder $work removed on exit.
set -u
actmem=$1
source_dir=$2
failures=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The tests' small model (tests/test_models.h), as $tiny and in $work/tiny.json.
tiny='{"name": "tiny", "architecture": "graphcast", "grid_nodes": 2000, "mesh_nodes": 500, "grid2mesh_edges": 3000,
 "mesh_edges": 3000, "mesh2grid_edges": 6000, "latent_size": 64, "mlp_hidden_layers": 1, "processor_steps": 4,
 "grid_input_features": 20, "mesh_input_features": 20, "edge_features": 4, "output_features": 10}'
echo "$tiny" >"$work/tiny.json"

# bound_actmem SECONDS [KIB]: from here on $actmem stops after SECONDS and,
# given KIB, unless it runs under AddressSanitizer (which reserves terabytes
# of address space), at KIB of address space; $binary is the program itself.
bound_actmem() {
  local limit=""
  binary=$actmem
  [ -n "${2:-}" ] && limit="ldd '$binary' 2>/dev/null | grep -q libasan || ulimit -v $2"
  printf '#!/usr/bin/env bash\n%s\nexec timeout %s "%s" "$@"\n' "$limit" "$1" "$binary" >"$work/actmem"
  chmod +x "$work/actmem"
  actmem="$work/actmem"
}

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# check_error EXPECTED_MESSAGE ARGS...: the command must exit 2 and print
# exactly "actmem: error: EXPECTED_MESSAGE" on stderr, nothing on stdout.
check_error() {
  check_error_line exact "$@"
}

# check_error_prefix EXPECTED_START ARGS...: as check_error, but the message
# need only start with "actmem: error: EXPECTED_START"; it must be one line.
check_error_prefix() {
  check_error_line prefix "$@"
}

# check_error_line exact|prefix EXPECTED ARGS...: what both of the above check.
check_error_line() {
  local match=$1 expected=$2
  shift 2
  local out err status
  out=$("$actmem" "$@" 2>"$work/stderr")
  status=$?
  err=$(cat "$work/stderr")
  [ "$status" -eq 2 ] || fail "actmem $*: exit $status, expected 2 ($err)"
  if [ "$match" = exact ]; then
    [ "$err" = "actmem: error: $expected" ] || fail "actmem $*: stderr was '$err', expected 'actmem: error: $expected'"
  else
    [[ "$err" == "actmem: error: $expected"* ]] || fail "actmem $*: stderr was '$err', expected 'actmem: error: $expected…'"
  fi
  [ "$(wc -l <"$work/stderr")" -eq 1 ] || fail "actmem $*: stderr is not one line: '$err'"
  [ -z "$out" ] || fail "actmem $*: unexpected stdout '$out'"
}

finish() {
  if [ "$failures" -gt 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "all checks passed"
}

#!/usr/bin/env bash
# End-to-end test of `actmem mesh`: usage `bash mesh.sh ACTMEM_BINARY SOURCE_DIR`.
# Exits non-zero, naming the failed check, when anything is off.
set -u
actmem=$1
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# Counts at 1 degree, level 5 (GraphCast_small's geometry).
out=$("$actmem" mesh --resolution 1 --mesh-level 5 --json) || fail "mesh --json exited $?"
expect() {
  local key=$1 value=$2
  grep -Eq "^  \"$key\": $value,?\$" <<<"$out" || fail "expected \"$key\": $value in: $out"
}
expect grid_nodes 65160
expect mesh_nodes 10242
expect mesh_edges 81900
expect grid2mesh_edges 101892
expect mesh2grid_edges 195480
expect mesh_level 5
grep -q '"in_degree"' <<<"$out" || fail "no in_degree in: $out"

# The human table carries the same counts.
table=$("$actmem" mesh --resolution 1 --mesh-level 5) || fail "mesh (table) exited $?"
grep -Eq "grid2mesh edges +101892" <<<"$table" || fail "table lacks the grid2mesh count: $table"

# Bad values: exit 2 and one error line.
check_error() {
  local expected=$1
  shift
  local err
  err=$("$actmem" mesh "$@" 2>&1 >/dev/null)
  local code=$?
  [ "$code" -eq 2 ] || fail "mesh $* exited $code, expected 2"
  [[ "$err" == "actmem: error: $expected"* ]] || fail "mesh $*: expected an error starting 'actmem: error: $expected', got: $err"
}
check_error "--resolution: expected a resolution" --resolution 0.7
check_error "--resolution: expected a resolution" --resolution 0
check_error "--mesh-level: expected a mesh level from 0 to 8, got 11" --mesh-level 11
check_error "--mesh-level: expected a mesh level from 0 to 8, got 010" --mesh-level 010
check_error "--resolution: expected a resolution in degrees of at least 0.25" --resolution 0.05
check_error "--radius-fraction: expected a radius fraction" --radius-fraction 0
check_error "mesh:" --resolution abc
check_error "mesh: unknown option '--mesh-levle'" --mesh-levle 5

if [ "$failures" -ne 0 ]; then
  echo "mesh.sh: $failures check(s) failed" >&2
  exit 1
fi
echo "mesh.sh: all checks passed"

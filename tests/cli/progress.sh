#!/usr/bin/env bash
# Progress on long work: a line on stderr that rewrites itself, only on a
# terminal (here a pseudo-terminal made by util-linux `script`), never when
# piped, never with --quiet. `bash progress.sh ACTMEM_BINARY SOURCE_DIR`.
source "$(dirname "$0")/lib.sh"

if ! command -v script >/dev/null; then
  echo "SKIP: util-linux 'script' (a pseudo-terminal) is not installed"
  exit 77
fi
# on_terminal OUT ARGS...: runs actmem with stdin, stdout and stderr on a
# pseudo-terminal, everything it printed in OUT.
on_terminal() {
  local out=$1
  shift
  script -qec "$(printf '%q ' "$actmem" "$@")" /dev/null >"$out" </dev/null
}

sweep=(sweep --model graphcast-small --devices a100-80gb,tpu-v4 --batch 1,2 --rollout 1)
on_terminal "$work/sweep.tty" "${sweep[@]}" || fail "sweep on a terminal exited $?"
grep -q 'actmem sweep: \[2/2\] batch 2, rollout 1' "$work/sweep.tty" || fail "no sweep progress: $(cat -v "$work/sweep.tty")"
grep -q $'\e\\[K' "$work/sweep.tty" || fail "progress does not erase its line"
# The table rows are whole lines: the progress line is erased before each.
[ "$(grep -c '^a100-80gb\|^tpu-v4' <(sed 's/.*\x1b\[K//' "$work/sweep.tty"))" = 4 ] || fail "rows: $(cat -v "$work/sweep.tty")"

on_terminal "$work/quiet.tty" "${sweep[@]}" --quiet || fail "sweep --quiet exited $?"
! grep -q 'actmem sweep:' "$work/quiet.tty" || fail "--quiet still shows progress"

"$actmem" "${sweep[@]}" >"$work/piped.out" 2>"$work/piped.err" || fail "piped sweep exited $?"
[ ! -s "$work/piped.err" ] || fail "progress written when stderr is not a terminal: $(cat -v "$work/piped.err")"
cmp -s <(sed 's/.*\x1b\[K//' "$work/sweep.tty" | tr -d '\r' | grep -v '^$') "$work/piped.out" ||
  fail "the table on a terminal differs from the piped one"

# Large geometry reports its steps.
on_terminal "$work/mesh.tty" mesh --resolution 1 --mesh-level 4 || fail "mesh on a terminal exited $?"
grep -q 'actmem mesh: \[4/5\] geometry: grid2mesh radius query' "$work/mesh.tty" || fail "no mesh progress: $(cat -v "$work/mesh.tty")"
on_terminal "$work/mesh-quiet.tty" mesh --resolution 1 --mesh-level 4 -q || fail "mesh -q exited $?"
! grep -q 'actmem mesh:' "$work/mesh-quiet.tty" || fail "mesh -q still shows progress"

finish

#!/usr/bin/env bash
# Output files end to end (docs/reliability.md "Files"): what -o, --svg and
# --timeline do to what is already at the path, decided on what is there as
# opened, never on the name; all of a command's files or none; no temporary
# left. `bash output_files.sh ACTMEM_BINARY SOURCE_DIR`.
source "$(dirname "$0")/lib.sh"

# Every run is bounded: an old version waited forever for a FIFO's reader.
bound_actmem 60

# ---- a path that names an open descriptor is written through it, at its
# offset and with its flags (was: `-o /dev/stdout >> log` replaced the log)
echo "kept" >"$work/log.txt"
"$actmem" plan --model "$work/tiny.json" -o /dev/stdout >>"$work/log.txt" 2>/dev/null || fail "plan -o /dev/stdout exited $?"
[ "$(head -1 "$work/log.txt")" = kept ] || fail "-o /dev/stdout >> log.txt replaced the log"
grep -q '"format": "actmem.plan"' "$work/log.txt" || fail "-o /dev/stdout >> log.txt: no plan in the log"
echo "kept" >"$work/err.txt"
"$actmem" simulate --model "$work/tiny.json" --timeline /dev/stderr 2>>"$work/err.txt" >/dev/null ||
  fail "--timeline /dev/stderr exited $?"
[ "$(head -1 "$work/err.txt")" = kept ] && grep -q '^index,pass,' "$work/err.txt" || fail "--timeline /dev/stderr 2>> err.txt"
echo "kept" >"$work/report.log"
"$actmem" report --model "$work/tiny.json" -o /proc/self/fd/1 --quiet >>"$work/report.log" ||
  fail "report -o /proc/self/fd/1 exited $?"
[ "$(head -1 "$work/report.log")" = kept ] && grep -q '^<!DOCTYPE html>' "$work/report.log" ||
  fail "report -o /proc/self/fd/1 >> report.log"
"$actmem" plan --model "$work/tiny.json" -o /dev/stdout 2>/dev/null | grep -q '"format": "actmem.plan"' ||
  fail "plan -o /dev/stdout into a pipe"

# ---- a FIFO no process reads: an error after a bounded wait (was: blocked forever)
mkfifo "$work/unread"
SECONDS=0
check_error "$work/unread: is a FIFO that no process opened for reading within 10 s" \
  plan --model "$work/tiny.json" -o "$work/unread"
[ "$SECONDS" -lt 30 ] || fail "-o FIFO without a reader took $SECONDS s"

# ---- permissions: a replaced file keeps its own, a new one gets the umask's (were all 0644)
"$actmem" plan --model "$work/tiny.json" -o "$work/secret.json" 2>/dev/null
chmod 600 "$work/secret.json"
"$actmem" plan --model "$work/tiny.json" -o "$work/secret.json" 2>/dev/null
[ "$(stat -c %a "$work/secret.json")" = 600 ] || fail "a 0600 plan became $(stat -c %a "$work/secret.json")"
(umask 077 && "$actmem" plan --model "$work/tiny.json" -o "$work/private.json" 2>/dev/null)
[ "$(stat -c %a "$work/private.json")" = 600 ] || fail "umask 077 gave $(stat -c %a "$work/private.json")"

# ---- all of a command's files or none (was: report --svg replaced before -o failed)
echo "kept" >"$work/keep.svg"
check_error "$work/nodir/x.html: cannot write: No such file or directory" \
  report --model "$work/tiny.json" --svg "$work/keep.svg" -o "$work/nodir/x.html"
[ "$(cat "$work/keep.svg")" = kept ] || fail "a failed report replaced keep.svg"

# ---- devices and FIFOs written through, long names, no temporaries left
# A node of its own, never /dev/null: a regression would replace that for everyone.
if mknod "$work/null" c 1 3 2>/dev/null; then
  "$actmem" plan --model "$work/tiny.json" -o "$work/null" 2>/dev/null || fail "plan -o <null device> exited $?"
  [ -c "$work/null" ] || fail "the device node was replaced by a file"
fi
mkfifo "$work/fifo"
cat "$work/fifo" >"$work/from-fifo" &
"$actmem" plan --model "$work/tiny.json" -o "$work/fifo" 2>/dev/null || fail "plan -o FIFO exited $?"
wait
[ -p "$work/fifo" ] || fail "the FIFO was replaced"
grep -q '"format": "actmem.plan"' "$work/from-fifo" || fail "nothing came through the FIFO"
long="$work/$(printf 'p%.0s' {1..245}).json"
"$actmem" plan --model "$work/tiny.json" -o "$long" 2>/dev/null || fail "plan -o <250-character name> exited $?"
[ -s "$long" ] || fail "the 250-character name was not written"
check_error "$work: is a directory" plan --model "$work/tiny.json" -o "$work"
for _ in $(seq 20); do
  "$binary" plan --model graphcast-small --device a100-80gb -o "$work/killed.json" 2>/dev/null &
  sleep "0.0$((RANDOM % 10))"
  kill -9 $! 2>/dev/null
  wait $! 2>/dev/null
done
"$actmem" plan --model graphcast-small --device a100-80gb -o "$work/killed.json" 2>/dev/null || fail "plan after kills"
/usr/bin/python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$work/killed.json" || fail "killed.json is not JSON"
[ -z "$(ls -A "$work" | grep '^\.')" ] || fail "temporary files left behind: $(ls -A "$work" | grep '^\.')"

finish

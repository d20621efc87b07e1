# The structure checks' shared pieces (tests/anatomy.sh,
# tests/solver_rule_free.sh): a source file's code, and the lines of it
# a check finds, reported. Source it; the caller sets broken=0 first.

# code FILE: FILE's lines without their // comments, string literals emptied.
code() { sed -E 's@"([^"\\]|\\.)*"@""@g; s@//.*$@@' "$1"; }

# report CHECK FILE WHAT < LINES: each line read reported on standard error
# as "CHECK: FILE WHAT: LINE"; any line sets broken=1.
report() {
  local line
  while IFS= read -r line; do
    echo "$1: $2 $3: $line" >&2
    broken=1
  done
}

#!/usr/bin/env bash
# The solver (planner/src/solve) composes what the engine's replays report
# in three generic forms of cross-stage effect (pending work, work run
# ahead, plan conditions; solve/solver_replay.h) and asks the engine, not
# the rules, how executions behave: no code line there reads a field of
# MemoryProfile (a rule's switch) or names a rule's mechanism (deferred
# ops, complete branches, layout copies), so a new rule that takes one of
# those forms needs no solver code (docs/architecture.md, "The memory
# rules"). Prints every line that breaks this; exit 1 if any.
set -euo pipefail
root="$1"
source "$(dirname "$0")/lib/code_lines.sh"
cd "$root"

# MemoryProfile's fields: its switches and settings, one declaration a line.
fields=$(sed -n '/^struct MemoryProfile {/,/^};/p' planner/src/cost/memory_profile.h |
  grep -oE '^\s+(bool|int|double|std::int64_t|Framework)\s+[a-z_0-9]+\s*(=|;)' |
  sed -E 's/^\s+\S+\s+([a-z_0-9]+).*/\1/' | sort -u | paste -sd'|')
[[ -n "$fields" ]] || { echo "solver_rule_free: no MemoryProfile fields found" >&2; exit 1; }
MECHANISMS='deferred|complete_branch|norm_cop|aligned|decoder|encoder'

broken=0
files=$(find planner/src/solve -type f \( -name '*.cpp' -o -name '*.h' \) | sort)
for file in $files; do
  report solver_rule_free "$file" "reads a rule's switch or names a rule's mechanism (ask the engine)" \
    < <(code "$file" | grep -nE "(\.|->)(${fields})\b|[a-z_0-9]*(${MECHANISMS})[a-z_0-9]*" || true)
done
((broken == 0)) || exit 1
echo "solver_rule_free: $(wc -w <<<"$files") solver files read no rule's switch and name no rule's mechanism"

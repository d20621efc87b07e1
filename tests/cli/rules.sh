#!/usr/bin/env bash
# `actmem rules` and --rule-off: the memory rules listed one line each, a
# rule switched off changing the prediction where it applies, recorded in the
# plan it makes, and an unknown name refused with a suggestion.
source "$(dirname "$0")/lib.sh"

echo '{"checkpoints": [], "step_checkpoint": true}' >"$work/step.json"
run=(--model "$work/tiny.json" --rollout 2 --plan "$work/step.json")
peak() { python3 -c 'import json, sys; print(json.load(sys.stdin)["peak_bytes"])'; }

# One line per rule, the same rules as --json.
"$actmem" rules >"$work/rules.txt" || fail "rules: exit $?"
"$actmem" rules --json >"$work/rules.json" || fail "rules --json: exit $?"
count=$(python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' "$work/rules.json")
[ "$count" -ge 40 ] || fail "rules --json: $count rules"
[ "$(wc -l <"$work/rules.txt")" -eq "$count" ] || fail "rules: $(wc -l <"$work/rules.txt") lines for $count rules"
grep -q '^xla.scan.holds_first_carry  *jax  .*\[always; J20\]$' "$work/rules.txt" ||
  fail "rules: no line for xla.scan.holds_first_carry: $(head -3 "$work/rules.txt")"

# Switched off where it applies, the peak changes; the run says so.
on=$("$actmem" simulate "${run[@]}" --json | peak)
off=$("$actmem" simulate "${run[@]}" --json --rule-off xla.scan.holds_first_carry | peak)
[ -n "$on" ] && [ "$on" != "$off" ] || fail "--rule-off xla.scan.holds_first_carry: peak $on both ways"
"$actmem" simulate "${run[@]}" --rule-off xla.scan.holds_first_carry | head -1 | grep -q ', without rule xla.scan.holds_first_carry$' ||
  fail "simulate --rule-off: the run line does not name the rule"
# A PyTorch rule in a JAX run: nothing changes, and the run line says why.
idle=$("$actmem" simulate "${run[@]}" --json --rule-off torch.slices_are_views | peak)
[ "$idle" = "$on" ] || fail "--rule-off torch.slices_are_views on a JAX run: peak $idle, expected $on"
"$actmem" simulate "${run[@]}" --rule-off torch.slices_are_views | head -1 |
  grep -q "(torch.slices_are_views not part of this run's profile anyway)" || fail "idle rule not said"

# The plan records it; simulate --plan reproduces its prediction; the
# command line's --rule-off replaces the plan's.
"$actmem" plan --model "$work/tiny.json" --rollout 2 --rule-off xla.scan.holds_first_carry \
  --rule-off xla.scan.copies_targets -o "$work/plan.json" --quiet 2>/dev/null || fail "plan --rule-off: exit $?"
python3 - "$work/plan.json" <<'PY' || fail "plan --rule-off: run.rules_off not recorded"
import json, sys
assert json.load(open(sys.argv[1]))["run"]["rules_off"] == ["xla.scan.copies_targets", "xla.scan.holds_first_carry"]
PY
predicted=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["predicted"]["peak_bytes"])' "$work/plan.json")
again=$("$actmem" simulate --plan "$work/plan.json" --json | peak)
[ "$again" = "$predicted" ] || fail "simulate --plan of a plan made without rules: $again, predicted $predicted"
all_on=$("$actmem" simulate --plan "$work/plan.json" --json --rule-off xla.fusion.concat_into_matmul | peak)
[ "$all_on" != "$again" ] || fail "--rule-off did not replace the plan's rules_off"

# Every command that predicts takes it.
"$actmem" fit --model "$work/tiny.json" --rule-off xla.scan.copies_targets --quiet >/dev/null || fail "fit --rule-off"
"$actmem" sweep --model "$work/tiny.json" --devices tpu-v4 --rule-off xla.scan.copies_targets --quiet >/dev/null ||
  fail "sweep --rule-off"
"$actmem" report --model "$work/tiny.json" --rule-off xla.scan.copies_targets -o "$work/r.html" --quiet ||
  fail "report --rule-off"
grep -q "without rule xla.scan.copies_targets" "$work/r.html" || fail "report: the subtitle does not name the rule"

# Unknown names: exit 2, the closest name suggested.
check_error "--rule-off: unknown rule 'xla.scan.holds_frist_carry' (did you mean 'xla.scan.holds_first_carry'?); see 'actmem rules'" \
  simulate --rule-off xla.scan.holds_frist_carry
check_error "--rule-off: unknown rule 'nothing'; see 'actmem rules'" fit --rule-off nothing
check_error_prefix "simulate: --rule-off: 1 required RULE missing" simulate --rule-off
# A plan the run cannot take without the rule: the error says which rule.
echo '{"checkpoints": [], "step_checkpoint": true, "host_offload": true}' >"$work/offload.json"
check_error "$work/offload.json: /host_offload: expected only where the rollout is XLA's scanned loop, which rule xla.scan.step_checkpoints_scanned (switched off) makes it" \
  simulate --model "$work/tiny.json" --rollout 2 --plan "$work/offload.json" --rule-off xla.scan.step_checkpoints_scanned
python3 - "$work/plan.json" "$work/edited.json" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
plan["run"]["rules_off"] = ["xla.scan.holds_frist_carry"]
json.dump(plan, open(sys.argv[2], "w"))
PY
check_error "$work/edited.json: /run/rules_off: unknown rule 'xla.scan.holds_frist_carry' (did you mean 'xla.scan.holds_first_carry'?); see 'actmem rules'" \
  simulate --plan "$work/edited.json"

finish

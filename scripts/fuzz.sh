#!/usr/bin/env bash
# Builds and runs the libFuzzer harnesses (fuzz/; docs/reliability.md) under
# AddressSanitizer + UndefinedBehaviorSanitizer, $ACTMEM_FUZZ_JOBS at a time
# (default 2).
#   scripts/fuzz.sh build              configure and build (clang, ACTMEM_FUZZ)
#   scripts/fuzz.sh smoke [SECONDS]    each harness for SECONDS (default 45): CI
#   scripts/fuzz.sh campaign [RUNS]    each harness for RUNS executions (default 1000000)
# Corpora grow in $ACTMEM_FUZZ_DIR/corpus/<harness> (default build-fuzz),
# seeded from fuzz/seeds, the model presets and the device catalog; logs go
# to $ACTMEM_FUZZ_DIR/logs, and any input that fails to
# $ACTMEM_FUZZ_DIR/findings. Exits non-zero on any finding. An input that
# runs longer than $ACTMEM_FUZZ_TIMEOUT seconds (default 10; wall clock, so
# raise it on a machine that others load) is a finding too.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-smoke}"
build="${ACTMEM_FUZZ_DIR:-build-fuzz}"
harnesses=(model device plan cli_arguments report python_values)

configure_and_build() {
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++ \
    -DACTMEM_FUZZ=ON -DACTMEM_TESTS=OFF -DACTMEM_PYTHON=OFF -DACTMEM_WARNINGS_AS_ERRORS=ON >/dev/null
  cmake --build "$build" -j2 --target "${harnesses[@]/#/fuzz_}"
}

# The seed corpus: fuzz/seeds, plus the presets and each catalog device.
seed() {
  local h
  for h in "${harnesses[@]}"; do
    mkdir -p "$build/corpus/$h"
    cp -n fuzz/seeds/"$h"/* "$build/corpus/$h/"
  done
  cp -n models/presets/*.json "$build/corpus/model/"
  python3 - models/devices.json "$build/corpus/device" <<'PY'
import json, pathlib, sys
for i, device in enumerate(json.load(open(sys.argv[1]))["devices"]):
    pathlib.Path(sys.argv[2], f"catalog-{i}.json").write_text(json.dumps(device))
PY
}

# run HARNESS LIMIT...: one harness; its log's last lines are its figures.
run() {
  local h=$1
  shift
  local dict=fuzz/dicts/json.dict extra=()
  [[ "$h" == cli_arguments || "$h" == report ]] && dict=fuzz/dicts/cli.dict
  # An embedded interpreter keeps allocations of its own past each input and at exit.
  local asan_options="${ASAN_OPTIONS:-}"
  [[ "$h" == python_values ]] && extra=(-detect_leaks=0) && asan_options="detect_leaks=0:$asan_options"
  mkdir -p "$build/logs" "$build/findings"
  # Absolute paths: fuzz_report runs each command in a folder of its own,
  # where a relative prefix would lose an input that times out.
  local at
  at="$(cd "$build" && pwd)"
  ASAN_OPTIONS="$asan_options" "$at/fuzz/fuzz_$h" "$at/corpus/$h" -dict="$dict" -timeout="${ACTMEM_FUZZ_TIMEOUT:-10}" \
    -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 -artifact_prefix="$at/findings/$h-" "${extra[@]}" "$@" \
    >"$build/logs/$h.log" 2>&1
}

# $ACTMEM_FUZZ_JOBS harnesses at a time (default 2, the machine's cores): the
# next starts when one ends. Fails if any failed or reported a finding.
run_all() {
  local status=0 h running=0 jobs="${ACTMEM_FUZZ_JOBS:-2}"
  for h in "${harnesses[@]}"; do
    if ((running == jobs)); then
      wait -n || status=1
      running=$((running - 1))
    fi
    run "$h" "$@" &
    running=$((running + 1))
  done
  while ((running > 0)); do
    wait -n || status=1
    running=$((running - 1))
  done
  for h in "${harnesses[@]}"; do
    echo "fuzz_$h: $(grep -E '^stat::number_of_executed_units' "$build/logs/$h.log" | awk '{print $2}') executions," \
      "$(grep -E '^stat::peak_rss_mb' "$build/logs/$h.log" | awk '{print $2}') MB peak," \
      "$(grep -oE '^Done [0-9]+ runs in [0-9]+ second' "$build/logs/$h.log" | grep -oE '[0-9]+ second' || echo '? second')s," \
      "corpus $(ls "$build/corpus/$h" | wc -l), $(grep -E '^#[0-9]+' "$build/logs/$h.log" | tail -1 | grep -oE 'cov: [0-9]+ ft: [0-9]+')"
    if grep -qE '^==[0-9]+==ERROR|^SUMMARY|deadly signal|fuzz: expectation failed' "$build/logs/$h.log"; then
      echo "fuzz_$h: FINDING (see $build/logs/$h.log and $build/findings/)" >&2
      status=1
    fi
  done
  return $status
}

case "$what" in
  build) configure_and_build ;;
  smoke)
    configure_and_build
    seed
    run_all -max_total_time="${2:-45}"
    ;;
  campaign)
    configure_and_build
    seed
    run_all -runs="${2:-1000000}"
    ;;
  *)
    echo "usage: scripts/fuzz.sh build | smoke [SECONDS] | campaign [RUNS]" >&2
    exit 2
    ;;
esac

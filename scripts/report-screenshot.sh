#!/usr/bin/env bash
# Remakes docs/report-graphcast-tpu-v4.png, the screenshot in docs/report.md:
# the browser test (tests/browser/report_in_chromium.sh) with the screenshot kept.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${ACTMEM_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target actmem_cli
ACTMEM_REQUIRE_BROWSER=1 bash tests/browser/report_in_chromium.sh "$build/cli/actmem" "$PWD" docs/report-graphcast-tpu-v4.png

#!/usr/bin/env bash
# Builds actmem with warnings as errors and runs every test: the C++ unit
# tests, the end-to-end CLI tests, and the validation against PyTorch.
set -euo pipefail
cd "$(dirname "$0")/.."
build="${ACTMEM_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DACTMEM_WARNINGS_AS_ERRORS=ON "$@" >/dev/null
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure -j 2

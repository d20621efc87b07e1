#!/usr/bin/env bash
# Installs actmem into a temporary prefix and builds an outside project
# against it (tests/install: consumer.cpp and the examples of docs/examples),
# then runs them and the installed tool. Exits non-zero on any failure.
#   scripts/test-install.sh [extra cmake arguments for actmem]
# ACTMEM_INSTALL_WORK=<dir> keeps the build, prefix and consumer build there
# (reused on the next run) instead of a temporary folder that is removed.
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir="$PWD"

if [[ -n "${ACTMEM_INSTALL_WORK:-}" ]]; then
  work="$ACTMEM_INSTALL_WORK"
  mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/actmem-install.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
prefix="$work/prefix"
rm -rf "$prefix" "$work/consumer"

echo "== install: configure and build actmem (library and tool only)"
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DACTMEM_TESTS=OFF -DACTMEM_PYTHON=OFF -DACTMEM_WARNINGS_AS_ERRORS=ON "$@" >/dev/null
cmake --build "$work/build" --target actmem actmem_cli
cmake --install "$work/build" --prefix "$prefix" >/dev/null

# The library and the package may go under lib/ or lib/<multiarch>/ (GNUInstallDirs).
for f in include/actmem/actmem.h bin/actmem; do
  [[ -f "$prefix/$f" ]] || { echo "test-install: FAILED: $f not installed under $prefix" >&2; exit 1; }
done
for name in libactmem.a actmemConfig.cmake actmemConfigVersion.cmake actmemTargets.cmake; do
  [[ -n "$(find "$prefix" -name "$name" -print -quit)" ]] ||
    { echo "test-install: FAILED: $name not installed under $prefix" >&2; exit 1; }
done

echo "== install: build the consumer against $prefix"
cmake -S "$source_dir/tests/install" -B "$work/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/consumer"

echo "== install: run them"
"$work/consumer/consumer"
"$work/consumer/examples/choose_device" 2 graphcast-small
"$prefix/bin/actmem" devices >/dev/null
echo "test-install: OK"

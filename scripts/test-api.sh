#!/usr/bin/env bash
# The library-API checks CI runs besides ctest (scripts/test.sh runs the
# unit tests, tests/thread_safety_test.cpp, the Python module's tests and
# the examples): installing actmem and building an outside project against
# it, and the thread-safety test under ThreadSanitizer.
#   scripts/test-api.sh            both
#   scripts/test-api.sh install    only the install test
#   scripts/test-api.sh tsan       only the ThreadSanitizer test
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"

if [[ "$what" == all || "$what" == install ]]; then
  echo "== api: install, then build and run an outside consumer (scripts/test-install.sh)"
  scripts/test-install.sh
fi

if [[ "$what" == all || "$what" == tsan ]]; then
  echo "== api: thread safety under ThreadSanitizer"
  build="${ACTMEM_TSAN_BUILD_DIR:-build-tsan}"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DACTMEM_TSAN=ON -DACTMEM_PYTHON=OFF \
    -DACTMEM_WARNINGS_AS_ERRORS=ON >/dev/null
  cmake --build "$build" --target actmem_api_tests
  # Any race report fails the run (exit 66); 2 threads suffice: TSan finds races from happens-before, not from timing.
  # setarch -R: TSan in GCC 12 cannot map its shadow memory under the high
  # mmap randomisation of newer kernels.
  runner=()
  if command -v setarch >/dev/null && setarch "$(uname -m)" -R true 2>/dev/null; then
    runner=(setarch "$(uname -m)" -R)
  fi
  ACTMEM_TEST_THREADS=2 TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
    "${runner[@]}" "$build/tests/actmem_api_tests" --test-suite="thread safety"
fi
echo "test-api: OK"

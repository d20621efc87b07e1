#!/usr/bin/env bash
# Installs what actmem needs to build and test, from Debian's packages only.
set -euo pipefail
packages=(
  cmake ninja-build g++ pkg-config
  libboost-graph-dev nlohmann-json3-dev libfmt-dev doctest-dev libcli11-dev
  pybind11-dev python3-dev python3-pytest python3-jsonschema
  python3-torch  # the reference framework the cost model is validated against
  clang libclang-rt-dev  # libFuzzer and the sanitizer runtimes for fuzz/ (scripts/fuzz.sh)
  clang-format   # the C++ style (.clang-format), checked by the CTest test `format`
  python3-venv   # the wheel's test in a fresh virtual environment (scripts/test-wheel.sh)
  chromium       # `actmem report` in a real browser (tests/browser/)
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

#!/usr/bin/env bash
# One command on a fresh Debian machine: install the dependencies, build
# actmem, and answer the question it exists for — does GraphCast 0.25° train
# on a 32 GB TPU v4, and with which checkpoints?
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/install-jax.sh  # JAX + libtpu (PyPI): the reference that XLA judges (integrations/jax)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build
echo
echo "\$ build/cli/actmem fit --model graphcast --device tpu-v4"
status=0
build/cli/actmem fit --model graphcast --device tpu-v4 || status=$?
# 0: fits, 1: does not fit — both are answers; anything else is a failure.
[ "$status" -le 1 ]

#!/usr/bin/env bash
# Everything `npm test` runs: setup, native build + ctest.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build_native.sh
(cd build/native && ctest --output-on-failure -j "$(nproc)")

#!/usr/bin/env bash
# Native build (baseline flags; Highway dispatches to SSE4/AVX2/AVX-512 at runtime).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/native -j "$(nproc)"

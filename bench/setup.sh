#!/usr/bin/env bash
# What `npm run bench` needs beyond `npm test`'s setup (Debian 12). Idempotent.
# - Debian's python3-onnx: bench/export_decode.py builds the decoding rows'
#   ONNX models (com.microsoft MultiHeadAttention / GroupQueryAttention) with it.
# - Debian's OpenBLAS (OpenMP flavour, sharing PyTorch's OpenMP threads):
#   without it python3-torch falls back to the reference BLAS, ~25x slower.
#   bench/run.mjs points PyTorch at it with LD_LIBRARY_PATH, so the system's
#   libblas.so.3 choice does not matter.
# - The peers from package.json (onnxruntime-node's postinstall would try to
#   download GPU binaries: ONNXRUNTIME_NODE_INSTALL=skip).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

PACKAGES=(python3-torch python3-numpy python3-onnx libopenblas0-openmp)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "bench setup: installing ${missing[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

for peer in onnxruntime-web onnxruntime-node @tensorflow/tfjs-core @tensorflow/tfjs-backend-wasm; do
  if [ ! -d "node_modules/$peer" ]; then
    echo "bench setup: npm install (peers missing)" >&2
    ONNXRUNTIME_NODE_INSTALL=skip npm install --no-audit --no-fund >&2
    break
  fi
done

# The WebAssembly package (dist/) when it was never built; rebuild it with
# `npm run build` after changing the sources.
if [ ! -f dist/mha-simd-threaded.wasm ]; then
  echo "bench setup: npm run build (dist/ is missing)" >&2
  bash scripts/build_wasm.sh >&2
fi

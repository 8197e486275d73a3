#!/usr/bin/env bash
# Everything `npm test` runs: setup, native build + ctest, WASM build + JS tests, browser tests,
# the speed guard.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build_native.sh
(cd build/native && ctest --output-on-failure -j "$(nproc)")
bash scripts/test_sanitized.sh   # the same suites under ASan + UBSan
bash scripts/fuzz.sh             # libFuzzer: safetensors reader and forward, ~60 s each
bash scripts/test_arm.sh --quick  # aarch64 build under qemu: NEON, SVE, SVE2, SVE_256, SVE2_128

# JS: dependencies when missing or stale, the WASM builds (incremental: only
# what changed since dist/ was made is rebuilt), then the node:test suites.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
bash scripts/build_wasm.sh
node --test tests/js/
# Node 20 has relaxed SIMD behind a flag: run the fixtures on the relaxed-SIMD build there too
# (Node >= 22 has it on, and the run above covered it).
RELAXED=(--experimental-wasm-relaxed-simd)
if node "${RELAXED[@]}" -e 'process.exit(0)' 2>/dev/null &&
   ! node -e 'import("./web/src/load.js").then((m) => process.exit(m.relaxedSimdSupported() ? 0 : 1))'; then
  # (decoding too: its attention and rotary kernels fuse their multiply-adds there)
  node "${RELAXED[@]}" --test tests/js/fixtures.test.js tests/js/decoding_fixtures.test.js \
    tests/js/float16_specials.test.js tests/js/info.test.js tests/js/relaxed_simd.test.js
fi

# Browser end-to-end tests (package, proxy, demo, decoding, bundled apps) in Chromium, Firefox
# and WebKit (as shipped, and with SharedArrayBuffer on as in Safari), each only launched on a page
# whose test agent takes its orders over fetch (tests/e2e/driver/); then the README's browser
# table must be what they found.
node --test tests/e2e/
node scripts/browser_table.mjs --check

# The speed guard: the package against onnxruntime-web at 1 thread, ratios against the floors
# of bench/guard.json (bench/README.md, "The speed guard"). bench/setup.sh brings PyTorch and
# ONNX, which export the peer's models.
bash bench/setup.sh
node bench/guard.mjs

#!/usr/bin/env bash
# Builds both WebAssembly variants (SIMD128 + pthreads, SIMD128 single-thread)
# with Emscripten through the same CMakeLists and copies them into dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

# emcc looks for acorn among Debian's node modules.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

HWY_SRC=$(bash scripts/fetch_highway_src.sh)
mkdir -p dist
for variant in threaded simd; do
  threads=OFF
  if [ "$variant" = threaded ]; then threads=ON; fi
  dir="build/wasm-$variant"
  emcmake cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMHA_WASM_THREADS=$threads \
    -DHWY_SOURCE_DIR="$PWD/$HWY_SRC" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
  cp "$dir"/bindings/mha-simd*.mjs "$dir"/bindings/mha-simd*.wasm dist/
  if [ "$variant" = threaded ]; then cp "$dir"/bindings/mha-simd-threaded.worker.js dist/; fi
done
# Emscripten 3.1.6 indexes the exception refcount with a signed shift
# (Atomics.add(HEAP32, ptr >> 2)), which throws for exceptions above 2 GiB:
# the catch never runs and the module's lock stays held. Make it unsigned.
sed -i 's/this\.ptr+0>>2,1)/this.ptr+0>>>2,1)/g' dist/mha-simd-threaded.mjs
if grep -q 'this\.ptr+0>>2' dist/mha-simd-threaded.mjs; then
  echo "build_wasm: exception refcount patch did not apply" >&2
  exit 1
fi
# The pthread worker script is CommonJS; the package is "type": "module".
echo '{ "type": "commonjs" }' > dist/package.json

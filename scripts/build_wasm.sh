#!/usr/bin/env bash
# Builds both WebAssembly variants (SIMD128 + pthreads, SIMD128 single-thread)
# with Emscripten through the same CMakeLists, each linked for browsers and for
# Node from the same objects, and lays them out in dist/:
#   dist/mha-simd{,-threaded}.wasm          the same binary for both environments
#   dist/mha-simd{,-threaded}.mjs, dist/mha-simd-threaded.worker.js
#                                           browser glue (-sENVIRONMENT=web,worker)
#   dist/mha-proxy-worker.mjs               the proxy's worker (web/src/proxy_worker.js bundled)
#   dist/node/...                           Node glue (-sENVIRONMENT=node)
set -euo pipefail
cd "$(dirname "$0")/.."

# emcc looks for acorn among Debian's node modules.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

HWY_SRC=$(bash scripts/fetch_highway_src.sh)
rm -rf dist
mkdir -p dist/node
for variant in threaded simd; do
  threads=OFF
  if [ "$variant" = threaded ]; then threads=ON; fi
  dir="build/wasm-$variant"
  emcmake cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMHA_WASM_THREADS=$threads \
    -DHWY_SOURCE_DIR="$PWD/$HWY_SRC" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
  cmp "$dir"/bindings/browser/mha-simd*.wasm "$dir"/bindings/node/mha-simd*.wasm
  cp "$dir"/bindings/browser/mha-simd*.wasm "$dir"/bindings/browser/mha-simd*.mjs dist/
  cp "$dir"/bindings/node/mha-simd*.mjs dist/node/
  if [ "$variant" = threaded ]; then
    cp "$dir"/bindings/browser/mha-simd-threaded.worker.js dist/
    cp "$dir"/bindings/node/mha-simd-threaded.worker.js dist/node/
  fi
done
# Emscripten 3.1.6 indexes the exception refcount with a signed shift
# (Atomics.add(HEAP32, ptr >> 2)), which throws for exceptions above 2 GiB:
# the catch never runs and the module's lock stays held. Make it unsigned.
for glue in dist/mha-simd-threaded.mjs dist/node/mha-simd-threaded.mjs; do
  sed -i 's/this\.ptr+0>>2,1)/this.ptr+0>>>2,1)/g' "$glue"
  if grep -q 'this\.ptr+0>>2' "$glue"; then
    echo "build_wasm: exception refcount patch did not apply to $glue" >&2
    exit 1
  fi
done
# Node's pthread worker script is CommonJS; the package is "type": "module".
echo '{ "type": "commonjs" }' > dist/node/package.json
node_modules/.bin/esbuild web/src/proxy_worker.js --bundle --minify --format=esm --log-level=warning \
  --outfile=dist/mha-proxy-worker.mjs
# What a page loads must not mention Node's modules (bundlers would try to resolve them).
if grep -lE "require\(|node:|worker_threads|['\"]fs['\"]" dist/*.mjs dist/*.js; then
  echo "build_wasm: the browser files above refer to Node modules" >&2
  exit 1
fi

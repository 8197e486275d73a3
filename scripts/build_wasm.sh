#!/usr/bin/env bash
# Builds the WebAssembly builds of web/src/builds.js (SIMD128 + pthreads,
# SIMD128 single-thread, relaxed SIMD + pthreads), in build/wasm-<build>,
# with Emscripten through the same CMakeLists, each linked for browsers and for
# Node from the same objects, and lays them out in dist/:
#   dist/mha-simd{,-threaded}.wasm, dist/mha-relaxed-simd-threaded.wasm
#                                           the same binary for both environments
#   dist/mha-simd{,-threaded}.mjs, dist/mha-simd-threaded.worker.js
#                                           browser glue (-sENVIRONMENT=web,worker)
#   dist/mha-proxy-worker.mjs               the proxy's worker (web/src/proxy_worker.js bundled)
#   dist/node/...                           Node glue (-sENVIRONMENT=node)
set -euo pipefail
cd "$(dirname "$0")/.."

# emcc looks for acorn among Debian's node modules.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}
# `npm run`/`npm test` put node_modules/.bin first on PATH, where binaryen's npm
# tools (version 132, for scripts/relax_wasm.mjs) would shadow Debian's 108 that
# emcc expects: with them emcc minifies the .wasm's import names but not the JS
# glue's, and no build loads. emcc gets the system's tools only.
PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v '/node_modules/\.bin$' | paste -sd: -)

HWY_SRC=$(bash scripts/fetch_highway_src.sh)
# The builds, from their one table (web/src/builds.js): "name file threads relaxedSimd" lines.
mapfile -t BUILDS < <(node --input-type=module -e "
  const { BUILDS } = await import('./web/src/builds.js');
  for (const [name, b] of Object.entries(BUILDS)) console.log(name, b.file, b.threads, b.relaxedSimd);")
[ "${#BUILDS[@]}" -gt 0 ] || { echo "build_wasm: no builds read from web/src/builds.js" >&2; exit 1; }
on_off() { if [ "$1" = true ]; then echo ON; else echo OFF; fi; }
rm -rf dist
mkdir -p dist/node
for line in "${BUILDS[@]}"; do
  read -r build name threads relaxed <<< "$line"
  dir="build/wasm-$build"
  emcmake cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DMHA_WASM_THREADS="$(on_off "$threads")" \
    -DMHA_WASM_RELAXED_SIMD="$(on_off "$relaxed")" -DHWY_SOURCE_DIR="$PWD/$HWY_SRC" >/dev/null
  cmake --build "$dir" -j "$(nproc)"
  linked="$dir/bindings/browser/$name.wasm"
  cmp "$linked" "$dir/bindings/node/$name.wasm"
  # dist/ gets the .wasm once no kernel-path function is too large for the engines'
  # best compilers (the script says why), named from the link's symbol map.
  if [ "$relaxed" = true ]; then
    # The kernels' placeholder import becomes f32x4.relaxed_madd (see the script),
    # names kept through it for the check.
    node scripts/wasm_function_sizes.mjs "$linked" "$dir/named.wasm" "$dir/bindings/browser/$name.mjs.symbols" --keep-names
    node scripts/relax_wasm.mjs "$dir/named.wasm" "$dir/relaxed-named.wasm"
    node scripts/wasm_function_sizes.mjs "$dir/relaxed-named.wasm" "dist/$name.wasm"
  else
    node scripts/wasm_function_sizes.mjs "$linked" "dist/$name.wasm" "$dir/bindings/browser/$name.mjs.symbols"
  fi
  cp "$dir/bindings/browser/$name.mjs" dist/
  cp "$dir/bindings/node/$name.mjs" dist/node/
  if [ "$threads" = true ]; then
    cp "$dir/bindings/browser/$name.worker.js" dist/
    # Vite inlines assets under 4 KiB (build.assetsInlineLimit) as data: URLs, and a Worker does
    # not start from one (only from its page's origin; it would take a Blob URL, worker-src blob:):
    # the worker script, 2.3 KiB, gets a comment that says so and spaces past that size.
    { printf '\n// Padded past 4 KiB so that bundlers ship this file as a file, not as a data: URL:'
      head -c 4096 /dev/zero | tr '\0' ' '; echo; } >> "dist/$name.worker.js"
    cp "$dir/bindings/node/$name.worker.js" dist/node/
    # Emscripten 3.1.6 indexes the exception refcount with a signed shift
    # (Atomics.add(HEAP32, ptr >> 2)), which throws for exceptions above 2 GiB:
    # the catch never runs and the module's lock stays held. Make it unsigned.
    for glue in "dist/$name.mjs" "dist/node/$name.mjs"; do
      sed -i 's/this\.ptr+0>>2,1)/this.ptr+0>>>2,1)/g' "$glue"
      if grep -q 'this\.ptr+0>>2' "$glue"; then
        echo "build_wasm: exception refcount patch did not apply to $glue" >&2
        exit 1
      fi
    done
    # Emscripten 3.1.6 starts pthread workers as classic scripts; they start as module workers,
    # as the proxy's does, so that the worker script runs as a module whether a worker starts
    # from its file or from a Blob URL that imports it (web/src/env_browser.js).
    sed -i 's/new Worker(pthreadMainJs)/new Worker(pthreadMainJs,{type:"module"})/' "dist/$name.mjs"
    if ! grep -q 'new Worker(pthreadMainJs,{type:"module"})' "dist/$name.mjs"; then
      echo "build_wasm: module worker patch did not apply to dist/$name.mjs" >&2
      exit 1
    fi
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
# Each build must load: glue and .wasm out of step fail here, not in the tests.
# (Node 20 runs relaxed SIMD behind a flag; later Node has it on.)
relaxed=()
if node --experimental-wasm-relaxed-simd -e '' 2>/dev/null; then relaxed=(--experimental-wasm-relaxed-simd); fi
for line in "${BUILDS[@]}"; do
  read -r build _ <<< "$line"
  node "${relaxed[@]}" --input-type=module -e "
    const { loadMHA } = await import('./web/src/index.js');
    await loadMHA({ build: '$build', threads: 1 });
    process.exit(0);" || { echo "build_wasm: the $build build does not load" >&2; exit 1; }
done

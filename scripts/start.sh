#!/usr/bin/env bash
# `npm start`: installs what is missing (apt packages, npm packages, the WASM build), then serves
# the demo page cross-origin isolated on 127.0.0.1 and prints its URL.
# Arguments go to scripts/serve.mjs, e.g. `npm start -- --port 9000` or `-- --no-isolation`.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi
if [ ! -f dist/mha-proxy-worker.mjs ] || [ ! -f dist/node/mha-simd.mjs ]; then npm run build; fi
exec node scripts/serve.mjs "$@"

#!/usr/bin/env node
// What a page downloads to run attention, per build, raw and gzip (level 6, as web servers
// commonly send): mha-wasm's files against onnxruntime-web's WebAssembly backend (its devDependency
// here). Our JS that an app bundles is measured as esbuild --minify makes it from web/src/browser.js.
// Usage: node bench/download_size.mjs (after npm run build).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const ORT = 'node_modules/onnxruntime-web/dist/';

const appBundle = (await esbuild.build({
  entryPoints: [`${ROOT}web/src/browser.js`], bundle: true, minify: true, format: 'esm', write: false,
  logLevel: 'error',
})).outputFiles[0].contents;

const file = (path) => readFileSync(`${ROOT}${path}`);
// Ours: the app's share, the proxy's worker, then the build's own files.
const ours = (build, threaded) => [`mha-wasm ${build} (proxy)`, [
  ['app bundle: web/src (minified)', appBundle],
  ...['mha-proxy-worker.mjs', `mha-${build}.mjs`, ...(threaded ? [`mha-${build}.worker.js`] : []),
    `mha-${build}.wasm`].map((name) => [`dist/${name}`, file(`dist/${name}`)])]];
const ort = (title, names) => [title, names.map((name) => [name, file(ORT + name)])];
const PAGES = [
  ours('relaxed-simd-threaded', true),
  ours('simd-threaded', true),
  ours('simd', false),
  ort('onnxruntime-web/wasm (ort.wasm.min.mjs + glue)',
    ['ort.wasm.min.mjs', 'ort-wasm-simd-threaded.mjs', 'ort-wasm-simd-threaded.wasm']),
  ort('onnxruntime-web/wasm (bundled: ort.wasm.bundle.min.mjs)',
    ['ort.wasm.bundle.min.mjs', 'ort-wasm-simd-threaded.wasm']),
];

const kib = (bytes) => `${(bytes / 1024).toFixed(1)} KiB`;
const pad = (text, width) => String(text).padStart(width);
for (const [page, files] of PAGES) {
  console.log(`\n${page}`);
  let raw = 0;
  let gzip = 0;
  for (const [name, bytes] of files) {
    const zipped = gzipSync(bytes, { level: 6 }).length;
    raw += bytes.length;
    gzip += zipped;
    console.log(`  ${name.padEnd(44)} ${pad(kib(bytes.length), 12)} ${pad(kib(zipped), 12)} gzip`);
  }
  console.log(`  ${'total'.padEnd(44)} ${pad(kib(raw), 12)} ${pad(kib(gzip), 12)} gzip`);
}

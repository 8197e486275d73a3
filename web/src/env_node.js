// How Node loads a build: its own files from the package, read from disk
// (never fetched). Browser bundles never see this file (package.json
// "exports": "node").
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { buildFiles } from './builds.js';

// The .wasm files are the browsers'; the JS glue (and its pthread worker
// script) is Node's own, in dist/node/.
const FILES = buildFiles((name) => new URL(name.endsWith('.wasm') ? `../../dist/${name}`
  : `../../dist/node/${name}`, import.meta.url));

export function fileUrls() {
  return FILES;
}

export function threadsOffReason() {
  return typeof SharedArrayBuffer === 'function' ? null : 'this Node has no SharedArrayBuffer';
}

export function hardwareConcurrency() {
  // availableParallelism arrived in Node 18.14.
  return os.availableParallelism ? os.availableParallelism() : os.cpus().length;
}

// Node keeps a process alive while Workers run; the pool's idle workers
// should not, as they never finish on their own.
function unrefWorkers(wasm) {
  if (!wasm.PThread) return;
  for (const worker of [...wasm.PThread.unusedWorkers, ...wasm.PThread.runningWorkers]) {
    worker.unref();
  }
}

// settings: createModule's own (mhaPoolSize: the pthread Workers to start).
export async function instantiate(files, settings) {
  // Emscripten 3.1.6 cannot read its .wasm under Node >= 18: hand it the bytes. A server
  // bundler (Next.js's webpack and Turbopack) that bundles this file leaves the import to Node:
  // the glue finds its pthread worker script beside it, in dist/node/.
  const [{ default: createModule }, wasmBinary] = await Promise.all([
    import(/* webpackIgnore: true */ /* turbopackIgnore: true */ /* @vite-ignore */ files.js.href),
    readFile(files.wasm)]);
  const wasm = await createModule({ ...settings, wasmBinary });
  unrefWorkers(wasm);
  return wasm;
}

// How Node loads a build: its own files from the package, read from disk
// (never fetched). Browser bundles never see this file (package.json
// "exports": "node").
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { buildFiles } from './builds.js';
import { MHAError } from './errors.js';

// The .wasm files are the browsers'; the JS glue (and its pthread worker
// script) is Node's own, in dist/node/.
const FILES = buildFiles((name) => new URL(name.endsWith('.wasm') ? `../../dist/${name}`
  : `../../dist/node/${name}`, import.meta.url));

export function fileUrls() {
  return FILES;
}

// The proxy's (loadMHA({ proxy: true })): its worker's script. The worker reads the engine's
// files itself (they are URL objects, which a message cannot carry).
export const proxyFiles = () => ({ proxyWorker: new URL('./proxy_worker_node.js', import.meta.url).href });

export const workerScript = async (url) => ({ url, file: url });

export const workerStartFailure = ({ file }) => `its script ${fileURLToPath(file)} did not load`;

// The proxy's worker thread, with the Web Worker API the client uses (proxy_client.js); its end,
// whatever the cause, is an error event (no lock needed: see env_browser.js's endsUnheard). It
// keeps the process alive only while a message to it awaits its reply (each gets one), as a
// pending call should; idle, it does not, as the pool's threads do not.
class ThreadWorker {
  constructor(url) {
    this.thread = new Worker(new URL(url));
    this.thread.unref();
    this.awaited = 0;
    const error = (message) => this.onerror({ message, preventDefault() {} });
    this.thread.on('message', (data) => {
      if (data.op !== 'started' && --this.awaited === 0) this.thread.unref();
      this.onmessage({ data });
    });
    this.thread.on('error', ({ message }) => error(message));
    this.thread.on('exit', (code) => error(`it exited with code ${code}`));
    this.thread.on('messageerror', () => this.onmessageerror());
  }

  postMessage(message, transfer) {
    this.thread.postMessage(message, transfer);
    if (this.awaited++ === 0) this.thread.ref();
  }

  terminate() {
    this.thread.terminate();
  }
}

export const startWorker = (script) => new ThreadWorker(script.url);

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

// Where the build's files are not beside this file's package: a bundler moved this file (and
// its import.meta.url) away, or copied the app without them. The settings that keep them.
function filesNotFound(files, error) {
  if (error?.code !== 'ENOENT' && error?.code !== 'ERR_MODULE_NOT_FOUND') return error;
  return new MHAError(`mha-wasm: the engine's files are not where the package expects them ` +
    `(${fileURLToPath(files.wasm)}): a bundler moved the package's JavaScript or left its dist/ ` +
    "folder behind. Leave mha-wasm to Node on the server: SvelteKit's adapter-node, list it in " +
    "dependencies (not devDependencies); Next.js, serverExternalPackages: ['mha-wasm'], and " +
    "with output: 'standalone', outputFileTracingIncludes: { '/*': " +
    "['./node_modules/mha-wasm/dist/**'] } (see docs/frameworks.md)");
}

// settings: createModule's own (mhaPoolSize: the pthread Workers to start).
export async function instantiate(files, settings) {
  // Emscripten 3.1.6 cannot read its .wasm under Node >= 18: hand it the bytes. A server
  // bundler (Next.js's webpack and Turbopack) that bundles this file leaves the import to Node:
  // the glue finds its pthread worker script beside it, in dist/node/.
  const [{ default: createModule }, wasmBinary] = await Promise.all([
    import(/* webpackIgnore: true */ /* turbopackIgnore: true */ /* @vite-ignore */ files.js.href),
    readFile(files.wasm)]).catch((error) => { throw filesNotFound(files, error); });
  const wasm = await createModule({ ...settings, wasmBinary });
  unrefWorkers(wasm);
  return wasm;
}

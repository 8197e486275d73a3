// loadMHA(): picks and instantiates one of the two WASM builds in dist/.
import { MHAError } from './errors.js';
import { MHALibrary } from './library.js';
import { checkOptionsObject, describe } from './validate.js';

const isNode = typeof process === 'object' && Boolean(process.versions && process.versions.node);
// Hidden from bundlers: only Node evaluates these imports.
const importNode = (name) => import(/* webpackIgnore: true */ /* @vite-ignore */ name);

// The URLs are written out in full so bundlers find and ship the files.
const BUILDS = {
  'simd-threaded': {
    importFactory: () => import('../../dist/mha-simd-threaded.mjs'),
    wasmUrl: () => new URL('../../dist/mha-simd-threaded.wasm', import.meta.url),
  },
  simd: {
    importFactory: () => import('../../dist/mha-simd.mjs'),
    wasmUrl: () => new URL('../../dist/mha-simd.wasm', import.meta.url),
  },
};

const AUTO_MAX_THREADS = 4;

// Shared memory is usable in Node and in cross-origin-isolated pages/workers.
function threadsUsable() {
  if (typeof SharedArrayBuffer !== 'function') return false;
  return isNode || globalThis.crossOriginIsolated === true;
}

function chooseBuild(requested) {
  if (requested === undefined) return threadsUsable() ? 'simd-threaded' : 'simd';
  if (!(requested in BUILDS)) {
    throw new MHAError(`build: expected 'simd-threaded' or 'simd', received ${describe(requested)}`);
  }
  if (requested === 'simd-threaded' && !threadsUsable()) {
    throw new MHAError("build: expected an environment with SharedArrayBuffer for " +
                       "'simd-threaded' (Node, or a cross-origin-isolated page), received one " +
                       'without it');
  }
  return requested;
}

async function hardwareConcurrency() {
  if (typeof navigator === 'object' && navigator.hardwareConcurrency) {
    return navigator.hardwareConcurrency;
  }
  if (isNode) {
    const os = await importNode('node:os');
    // availableParallelism arrived in Node 18.14.
    return os.availableParallelism ? os.availableParallelism() : os.cpus().length;
  }
  return 1;
}

async function chooseThreads(threads, build) {
  if (build === 'simd') {
    if (threads !== undefined && threads !== 'auto' && threads !== 1) {
      throw new MHAError(`threads: expected 'auto' or 1 for the single-thread 'simd' build, ` +
                         `received ${describe(threads)}`);
    }
    return 1;
  }
  if (threads === undefined || threads === 'auto') {
    return Math.min(await hardwareConcurrency(), AUTO_MAX_THREADS);
  }
  if (!Number.isSafeInteger(threads) || threads < 1) {
    throw new MHAError(`threads: expected 'auto' or a positive integer, received ` +
                       describe(threads));
  }
  return threads;
}

async function readWasm(url) {
  // Emscripten 3.1.6 cannot fetch its .wasm under Node >= 18: hand it the bytes.
  if (isNode) return (await importNode('node:fs/promises')).readFile(url);
  const response = await fetch(url);
  if (!response.ok) throw new Error(`mha-wasm: fetching ${url} failed: ${response.status}`);
  return response.arrayBuffer();
}

// Node keeps a process alive while Workers run; the pool's idle workers
// should not, as they never finish on their own.
function unrefWorkers(wasm) {
  if (!isNode || !wasm.PThread) return;
  for (const worker of [...wasm.PThread.unusedWorkers, ...wasm.PThread.runningWorkers]) {
    worker.unref();
  }
}

// options: { threads: 'auto' | number, build: 'simd-threaded' | 'simd' }.
// threads beyond the build's worker pool are capped (lib.info.threads says
// how many run).
export async function loadMHA(options) {
  const o = checkOptionsObject(options, 'loadMHA options', ['threads', 'build']);
  const build = chooseBuild(o.build);
  const threads = await chooseThreads(o.threads, build);
  const { importFactory, wasmUrl } = BUILDS[build];
  const [{ default: createModule }, wasmBinary] =
    await Promise.all([importFactory(), readWasm(wasmUrl())]);
  const wasm = await createModule({ wasmBinary });
  if (wasm.initialize(threads) !== 0) throw new Error('mha-wasm: thread pool already initialized');
  unrefWorkers(wasm);
  return new MHALibrary(wasm, build);
}

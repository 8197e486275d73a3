// Loads one of the two WASM builds in the calling thread, whatever the
// environment: `env` (env_browser.js or env_node.js) says where the files are,
// whether threads are possible and how to instantiate.
import { MHAError } from './errors.js';
import { MHALibrary } from './library.js';
import { checkOptionsObject, describe } from './validate.js';

const BUILDS = ['simd-threaded', 'simd'];
const LOAD_OPTIONS = ['threads', 'build', 'proxy', 'wasmPaths'];
const AUTO_MAX_THREADS = 4;

export function checkLoadOptions(options) {
  const o = checkOptionsObject(options, 'loadMHA options', LOAD_OPTIONS);
  if (o.build !== undefined && !BUILDS.includes(o.build)) {
    throw new MHAError(`build: expected 'simd-threaded' or 'simd', received ${describe(o.build)}`);
  }
  if (o.proxy !== undefined && o.proxy !== 'auto' && typeof o.proxy !== 'boolean') {
    throw new MHAError(`proxy: expected 'auto', true or false, received ${describe(o.proxy)}`);
  }
  if (o.threads !== undefined && o.threads !== 'auto' &&
      !(Number.isSafeInteger(o.threads) && o.threads >= 1)) {
    throw new MHAError(`threads: expected 'auto' or a positive integer, received ${describe(o.threads)}`);
  }
  if (o.build === 'simd' && o.threads !== undefined && o.threads !== 'auto' && o.threads !== 1) {
    throw new MHAError(`threads: expected 'auto' or 1 for the single-thread 'simd' build, ` +
                       `received ${describe(o.threads)}`);
  }
  return o;
}

// { build, threadsOffReason }: the threaded build where shared memory is
// usable, else the other and why.
function chooseBuild(requested, envReason) {
  if (requested === 'simd') return { build: 'simd', threadsOffReason: "build 'simd' was asked for" };
  if (envReason === null) return { build: 'simd-threaded', threadsOffReason: null };
  if (requested === 'simd-threaded') {
    throw new MHAError("build: expected an environment with SharedArrayBuffer for " +
                       `'simd-threaded' (Node, or a cross-origin-isolated page), received one ` +
                       `without it: ${envReason}`);
  }
  return { build: 'simd', threadsOffReason: envReason };
}

function chooseThreads(threads, build, env) {
  if (build === 'simd') return 1;
  if (threads === undefined || threads === 'auto') {
    return Math.min(env.hardwareConcurrency(), AUTO_MAX_THREADS);
  }
  return threads;
}

// options: checked by checkLoadOptions; files: env.fileUrls(wasmPaths).
// threads beyond the build's worker pool are capped (lib.info.threads says
// how many run).
export async function loadInThread(options, env, files) {
  const { build, threadsOffReason } = chooseBuild(options.build, env.threadsOffReason());
  const threads = chooseThreads(options.threads, build, env);
  const wasm = await env.instantiate(files[build]);
  if (wasm.initialize(threads) !== 0) throw new Error('mha-wasm: thread pool already initialized');
  return new MHALibrary(wasm, { build, threadsOffReason });
}

// The one warning a page gets when it runs single-threaded without asking to.
let warned = false;
export function warnIfThreadsOff(info, options) {
  if (warned || info.threadsOffReason === null || options.build === 'simd') return;
  warned = true;
  console.warn(`mha-wasm: running single-threaded: ${info.threadsOffReason}. For threads, serve ` +
               'the page with the headers Cross-Origin-Opener-Policy: same-origin and ' +
               'Cross-Origin-Embedder-Policy: require-corp (see the README, "Use in a web app").');
}

// Loads one of the three WASM builds in the calling thread, whatever the
// environment: `env` (env_browser.js or env_node.js) says where the files are,
// whether threads are possible and how to instantiate.
import { BUILD_NAMES } from './builds.js';
import { MHAError } from './errors.js';
import { MHALibrary } from './library.js';
import { checkOptionsObject, describe } from './validate.js';

const LOAD_OPTIONS = ['threads', 'build', 'proxy', 'wasmPaths'];
const AUTO_MAX_THREADS = 4;
// More threads than this are capped (lib.info.threads says how many run).
const MAX_THREADS = 8;

export function checkLoadOptions(options) {
  const o = checkOptionsObject(options, 'loadMHA options', LOAD_OPTIONS);
  if (o.build !== undefined && !BUILD_NAMES.includes(o.build)) {
    throw new MHAError(`build: expected one of ${BUILD_NAMES.map((b) => `'${b}'`).join(', ')}, ` +
                       `received ${describe(o.build)}`);
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

// A module whose one function is f32x4.relaxed_madd of three zero vectors:
// it validates where the engine runs relaxed SIMD (Chrome >= 114, Node >= 22,
// Node 20 with --experimental-wasm-relaxed-simd).
const ZERO_V128 = [0xfd, 0x0c, ...new Array(16).fill(0)];
const RELAXED_SIMD_PROBE = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
  1, 5, 1, 0x60, 0, 1, 0x7b,                                 // type: () -> v128
  3, 2, 1, 0,                                                 // one function
  10, 61, 1, 59, 0, ...ZERO_V128, ...ZERO_V128, ...ZERO_V128,
  0xfd, 0x85, 0x02, 0x0b]);                                   // relaxed_madd; end

export function relaxedSimdSupported() {
  return WebAssembly.validate(RELAXED_SIMD_PROBE);
}

// { build, threadsOffReason }: a threaded build where shared memory is usable
// (the relaxed-SIMD one where the engine has relaxed SIMD), else the
// single-thread build and why.
function chooseBuild(requested, envReason) {
  if (requested === 'simd') return { build: 'simd', threadsOffReason: "build 'simd' was asked for" };
  if (envReason === null) {
    if (requested === 'relaxed-simd-threaded' && !relaxedSimdSupported()) {
      throw new MHAError("build: expected an engine with relaxed SIMD for 'relaxed-simd-threaded' " +
                         '(Chrome >= 114, Node >= 22), received one without it');
    }
    const relaxed = requested === undefined ? relaxedSimdSupported() : requested !== 'simd-threaded';
    return { build: relaxed ? 'relaxed-simd-threaded' : 'simd-threaded', threadsOffReason: null };
  }
  if (requested !== undefined) {
    throw new MHAError("build: expected an environment with SharedArrayBuffer for " +
                       `'${requested}' (Node, or a cross-origin-isolated page), received one ` +
                       `without it: ${envReason}`);
  }
  return { build: 'simd', threadsOffReason: envReason };
}

function chooseThreads(threads, build, env) {
  if (build === 'simd') return 1;
  if (threads === undefined || threads === 'auto') {
    return Math.min(env.hardwareConcurrency(), AUTO_MAX_THREADS);
  }
  return Math.min(threads, MAX_THREADS);
}

// { build, threadsOffReason, threads }: what options (checked by
// checkLoadOptions) come to in this environment; loadMHA keys on it, so that
// options naming the same build and threads share one library (load_once.js).
export function resolveLoad(options, env) {
  const { build, threadsOffReason } = chooseBuild(options.build, env.threadsOffReason());
  return { build, threadsOffReason, threads: chooseThreads(options.threads, build, env) };
}

// options: checked by checkLoadOptions; files: env.fileUrls(wasmPaths). The
// threaded builds start one pthread Worker per thread beside the calling one,
// at instantiation (the binding's pool must find them there), and no more; at
// least one, as Emscripten 3.1.6 waits for a pool to load and never finishes
// with an empty one.
export async function loadInThread(options, env, files) {
  const { build, threadsOffReason, threads } = resolveLoad(options, env);
  const wasm = await env.instantiate(files[build], { mhaPoolSize: Math.max(threads - 1, 1) });
  if (wasm.initialize(threads) !== 0) throw new Error('mha-wasm: thread pool already initialized');
  return new MHALibrary(wasm, { build, threadsOffReason, relaxedSimd: relaxedSimdSupported() });
}

// The one warning a page gets when it runs single-threaded without asking to.
let warned = false;
export function warnIfThreadsOff(info, options) {
  if (warned || info.threadsOffReason === null || options.build === 'simd') return;
  warned = true;
  console.warn(`mha-wasm: running single-threaded: ${info.threadsOffReason}. For threads, serve ` +
               'the page with the headers Cross-Origin-Opener-Policy: same-origin and ' +
               'Cross-Origin-Embedder-Policy: require-corp (see docs/web-apps.md, "Threads and relaxed SIMD").');
}

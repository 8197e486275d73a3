// Where a page or a Web Worker finds the package's files, and how it loads a
// build. No Node code here: this file is what browser bundles contain.
import { buildFiles } from './builds.js';
import { MHAError } from './errors.js';
import { describe } from './validate.js';

// Each URL is written out in full, `new URL('literal', import.meta.url)`, so
// that Vite, webpack 5 and Parcel ship the file and rewrite the URL: the
// table of builds.js by hand (tests/js/builds.test.js checks they agree).
function packagedFiles() {
  return {
    'relaxed-simd-threaded': {
      js: new URL('../../dist/mha-relaxed-simd-threaded.mjs', import.meta.url).href,
      wasm: new URL('../../dist/mha-relaxed-simd-threaded.wasm', import.meta.url).href,
      worker: new URL('../../dist/mha-relaxed-simd-threaded.worker.js', import.meta.url).href,
    },
    'simd-threaded': {
      js: new URL('../../dist/mha-simd-threaded.mjs', import.meta.url).href,
      wasm: new URL('../../dist/mha-simd-threaded.wasm', import.meta.url).href,
      worker: new URL('../../dist/mha-simd-threaded.worker.js', import.meta.url).href,
    },
    simd: {
      js: new URL('../../dist/mha-simd.mjs', import.meta.url).href,
      wasm: new URL('../../dist/mha-simd.wasm', import.meta.url).href,
    },
    proxyWorker: new URL('../../dist/mha-proxy-worker.mjs', import.meta.url).href,
  };
}

// What a relative URL is relative to: the page's base URL, or in a worker its script's. A
// bundler may have left the package's URLs relative (Next.js has webpack and Turbopack do so).
const absolute = (url) => new URL(url, globalThis.document?.baseURI ?? globalThis.location?.href).href;

// The same files under `wasmPaths`, a base URL where dist/ is served (for
// tools that copy no assets, and CDNs).
function filesUnder(wasmPaths) {
  if (!(typeof wasmPaths === 'string' || wasmPaths instanceof URL)) {
    throw new MHAError(`wasmPaths: expected a string or a URL, received ${describe(wasmPaths)}`);
  }
  let base = String(wasmPaths);
  if (!base.endsWith('/')) base += '/';
  const at = (name) => new URL(name, absolute(base)).href;
  return { ...buildFiles(at), proxyWorker: at('mha-proxy-worker.mjs') };
}

const absoluteAll = (files) => Object.fromEntries(Object.entries(files).map(([key, value]) =>
  [key, typeof value === 'string' ? absolute(value) : absoluteAll(value)]));

// { [build]: { js, wasm, worker? }, proxyWorker }: absolute URLs.
export function fileUrls(wasmPaths) {
  return wasmPaths === undefined ? absoluteAll(packagedFiles()) : filesUnder(wasmPaths);
}

const sameOrigin = (url) => new URL(url).origin === globalThis.location?.origin;

// Trusted Types (a Content-Security-Policy's `require-trusted-types-for 'script'`): a Worker's
// script URL must come from a policy. The package's is named 'mha-wasm' (a `trusted-types`
// directive must list it) and is only given the URLs made here: the package's worker scripts
// and the Blob URLs that import them.
let policy;
function trusted(url) {
  if (globalThis.trustedTypes === undefined) return url;
  try {
    policy ??= globalThis.trustedTypes.createPolicy('mha-wasm', { createScriptURL: (u) => u });
  } catch (error) {
    throw new MHAError("mha-wasm: the page's Content-Security-Policy refused the Trusted Types " +
                       "policy 'mha-wasm' that the package starts its workers with; add mha-wasm " +
                       `to its trusted-types directive (${error.message})`);
  }
  return policy.createScriptURL(url);
}

// A same-origin Blob worker script that imports `url` and hands it the messages that arrive
// meanwhile (the script sets self.onmessage when it runs). By import(), not a static import:
// WebKit fails a Blob module worker's static import of another origin on an isolated page. A
// failed import is thrown in a task of its own, so that the creator's worker.onerror hears of it.
function importingWorkerUrl(url) {
  const code = 'const early = []; self.onmessage = (event) => early.push(event);\n' +
    `import(${JSON.stringify(url)}).then(() => { for (const event of early) self.onmessage(event); },\n` +
    '  (error) => setTimeout(() => { throw error; }));\n';
  return URL.createObjectURL(new Blob([code], { type: 'text/javascript' }));
}

// Why the same-origin file at `url` cannot start a worker itself, or null. On a cross-origin
// isolated page a worker's script needs Cross-Origin-Embedder-Policy (some servers send it with
// pages only, as SvelteKit's adapter-node); asked by a HEAD request, unknown counts as having
// it. With `importFree`, the script must not import statically: WebKit does not start a nested
// module worker (a thread worker of the proxy's) from one, and Vite's dev server adds an import
// to the thread worker script.
async function cannotStart(url, importFree) {
  if (globalThis.crossOriginIsolated !== true && !importFree) return null;
  let response;
  try {
    response = await fetch(url, { method: importFree ? 'GET' : 'HEAD' });
  } catch {
    return null;
  }
  if (!response.ok) return null;
  const coep = response.headers.get('Cross-Origin-Embedder-Policy') ?? '';
  if (globalThis.crossOriginIsolated === true && !/^\s*(require-corp|credentialless)/.test(coep)) {
    return 'it is served without the header Cross-Origin-Embedder-Policy: require-corp, which a ' +
           'worker script of a cross-origin isolated page needs';
  }
  if (importFree && /^\s*import\s*[{*\w]/.test(await response.text())) {
    return "it is served with static imports (a dev server's), from which WebKit starts no nested worker";
  }
  return null;
}

// How a module Worker runs the package's script at `url`: { url, file, blobBecause } with `url`
// for the Worker's constructor. The file itself where it can (a Content-Security-Policy's
// `worker-src 'self'` allows it), else a Blob URL that imports it (`worker-src blob:`), and
// `blobBecause` says why: a Worker starts only from its creator's origin (not a CDN's file, nor
// a data: URL), and cannotStart's reasons (`importFree`: see there).
// A Blob URL is made for each read of `url` (each Worker: Emscripten's pool, a proxy restarted)
// and revoked once the Worker constructor that read it has returned, so that none outlives its
// worker: the constructor resolves a blob: URL as it parses it (HTML, "new Worker(scriptURL)";
// URL's parser keeps the Blob), and readers construct at once.
export async function workerScript(url, importFree = false) {
  const blobBecause = sameOrigin(url) ? await cannotStart(url, importFree) : "it is not on the page's origin";
  if (!blobBecause) return { url: trusted(url), file: url, blobBecause };
  return {
    get url() {
      const blobUrl = importingWorkerUrl(url);
      queueMicrotask(() => URL.revokeObjectURL(blobUrl));
      return trusted(blobUrl);
    },
    file: url,
    blobBecause,
  };
}

// A module Worker running `script` (workerScript's).
export const startWorker = (script) => new Worker(script.url, { type: 'module' });
// A Worker that ends (terminated from outside, crashed) fires no event: the proxy's client learns
// it from a lock the worker holds (proxy_client.js).
export const endsUnheard = true;

// Why a Worker started from `script` (workerScript's) did not start, for an MHAError.
export function workerStartFailure({ file, blobBecause }) {
  if (blobBecause) {
    return `its script ${file} ran from a blob: URL since ${blobBecause}, and did not load: ` +
           'a Content-Security-Policy must allow worker-src blob: (or serve the script from the ' +
           "page's origin with Cross-Origin-Embedder-Policy: require-corp)";
  }
  return `its script ${file} did not load: check that it is served as JavaScript, that the ` +
         "page's Content-Security-Policy allows it (worker-src) and, on a cross-origin isolated " +
         'page, that it has the header Cross-Origin-Embedder-Policy: require-corp';
}

export function threadsOffReason() {
  if (globalThis.crossOriginIsolated === false) return 'the page is not cross-origin isolated';
  if (typeof SharedArrayBuffer !== 'function') return 'this browser has no SharedArrayBuffer';
  return null;
}

export function hardwareConcurrency() {
  return globalThis.navigator?.hardwareConcurrency || 1;
}

async function fetchBytes(url) {
  let response;
  try {
    response = await fetch(url);
  } catch (error) {
    response = { ok: false, status: error.message };
  }
  if (!response.ok) {
    throw new MHAError(`mha-wasm: fetching ${url} failed (${response.status}); if a bundler or ` +
                       'a CDN serves the files of dist/ elsewhere, pass loadMHA({ wasmPaths })');
  }
  return response.arrayBuffer();
}

const threadsNotStarted = (script, detail) =>
  new MHAError(`mha-wasm: the engine's thread workers did not start: ${workerStartFailure(script)} (${detail})`);

// Rejects if a worker of Emscripten's pool (`workers`, started from `script`) does not start,
// before Emscripten's own onerror (which throws, leaving the module's promise pending).
function poolStarted(workers, script) {
  return new Promise((resolve, reject) => {
    for (const worker of workers) {
      worker.addEventListener('error', (event) => {
        if (event.message) return;   // a thread's own error: Emscripten's
        event.stopImmediatePropagation();
        reject(threadsNotStarted(script, 'its script did not load'));
      });
    }
  });
}

// Instantiates one build from its files: { js, wasm, worker? } (absolute URLs); settings:
// createModule's own (mhaPoolSize: the pthread Workers to start). The threaded builds' pool
// workers are module workers (scripts/build_wasm.sh) running the worker script, which imports
// files.js, from its file or, where that cannot start one, a Blob URL.
export async function instantiate(files, settings) {
  const [{ default: createModule }, wasmBinary, script] = await Promise.all([
    import(/* webpackIgnore: true */ /* @vite-ignore */ files.js), fetchBytes(files.wasm),
    files.worker && workerScript(files.worker, true)]);
  const module = {
    ...settings,
    wasmBinary,
    mainScriptUrlOrBlob: files.js,
    locateFile: (name) => (name.endsWith('.worker.js') ? script.url : name),
  };
  // Emscripten 3.1.6 makes its pool's workers as the module starts, and exports them as PThread.
  // WebKit throws there for a worker that a Content-Security-Policy refuses; the others fire its
  // error event.
  let instance;
  try {
    instance = createModule(module);
  } catch (error) {
    throw script && error.name === 'SecurityError' ? threadsNotStarted(script, error.message) : error;
  }
  return script ? Promise.race([instance, poolStarted(module.PThread.unusedWorkers, script)]) : instance;
}

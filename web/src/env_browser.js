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

// The same files under `wasmPaths`, a base URL where dist/ is served (for
// tools that copy no assets, and CDNs).
function filesUnder(wasmPaths) {
  if (!(typeof wasmPaths === 'string' || wasmPaths instanceof URL)) {
    throw new MHAError(`wasmPaths: expected a string or a URL, received ${describe(wasmPaths)}`);
  }
  let base = String(wasmPaths);
  if (!base.endsWith('/')) base += '/';
  const at = (name) => new URL(name, new URL(base, globalThis.location?.href)).href;
  return { ...buildFiles(at), proxyWorker: at('mha-proxy-worker.mjs') };
}

// { [build]: { js, wasm, worker? }, proxyWorker }: absolute URLs.
export function fileUrls(wasmPaths) {
  return wasmPaths === undefined ? packagedFiles() : filesUnder(wasmPaths);
}

const sameOrigin = (url) => new URL(url).origin === globalThis.location?.origin;

// A same-origin Blob worker script that imports `url` and hands it the messages that arrive
// meanwhile (the script sets self.onmessage when it runs). By import(), not a static import:
// WebKit fails a Blob module worker's static import of another origin on an isolated page, and
// a classic worker (Emscripten's pthreads) has only import(). A failed import is thrown in a
// task of its own, so that the page's worker.onerror hears of it.
function importingWorkerUrl(url) {
  const code = 'const early = []; self.onmessage = (event) => early.push(event);\n' +
    `import(${JSON.stringify(url)}).then(() => { for (const event of early) self.onmessage(event); },\n` +
    '  (error) => setTimeout(() => { throw error; }));\n';
  return URL.createObjectURL(new Blob([code], { type: 'text/javascript' }));
}

// A Worker may only start from a same-origin script: for one on a CDN, a Blob that loads it.
export function moduleWorkerUrl(url) {
  return sameOrigin(url) ? url : importingWorkerUrl(url);
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

// Instantiates one build from its files: { js, wasm, worker? } (absolute URLs);
// settings: createModule's own (mhaPoolSize: the pthread Workers to start).
export async function instantiate(files, settings) {
  const [{ default: createModule }, wasmBinary] = await Promise.all([
    import(/* webpackIgnore: true */ /* @vite-ignore */ files.js), fetchBytes(files.wasm)]);
  // The pthread workers (threaded build) run the worker script, which loads files.js; in
  // whatever form a bundler left it (same- or cross-origin, a data: URL as Vite inlines small
  // assets, module syntax as Vite's dev server serves it), through a Blob that imports it.
  const pthreadWorker = files.worker && importingWorkerUrl(files.worker);
  return createModule({
    ...settings,
    wasmBinary,
    mainScriptUrlOrBlob: files.js,
    locateFile: (name) => (name.endsWith('.worker.js') ? pthreadWorker : name),
  });
}

// Large checkpoints streamed from fetch() Responses into a module: in the page's own thread (the
// 'simd' build) and through the page's default library (the proxy: the threaded build where the
// browser shares memory, the page's thread reading, the worker's core loading);
// tests/e2e/streamed_load.test.mjs serves the shards.
import { MHAError, loadMHA } from '/web/src/browser.js';

const libs = { inThread: await loadMHA({ proxy: false, build: 'simd' }), proxied: await loadMHA() };
const modules = {};  // the module last loaded by each library

// Chromium's JS heap held, its garbage collected first (gc: --expose-gc; null elsewhere): the
// chunks a stream hands out are garbage once copied, but stay in the heap until a collection.
const jsHeap = () => {
  if (typeof gc !== 'function' || !performance.memory) return null;
  gc();
  return performance.memory.usedJSHeapSize;
};

async function output(mha, config) {
  const x = { data: new Float32Array(config.embedDim).fill(1), shape: [1, 1, config.embedDim] };
  return Array.from((await mha.forward(x, x, x, { needWeights: false })).output.data);
}

window.streamTest = {
  // A new module loaded from fetch(url) of each url: { memory, heapRise (the rise of the WASM
  // heap's top, a high-water mark, over the load), jsRise (Chromium: the largest rise of the JS
  // heap held, sampled at every tenth progress event, else null), events, monotone, loaded,
  // total, output, info } from `which` library (libs' keys).
  async load(urls, config, prefix, which) {
    modules[which]?.dispose();
    const lib = libs[which];
    const mha = lib.createMultiheadAttention(config);
    modules[which] = mha;
    const top = (await lib.heapInfo()).heapTop;
    const js = jsHeap();
    let jsPeak = js;
    let events = 0;
    let monotone = true;
    let last = { loaded: 0, total: null };
    const responses = await Promise.all(urls.map((url) => fetch(url)));
    await mha.loadSafetensors(responses, {
      prefix,
      onProgress: (p) => {
        events += 1;
        monotone &&= p.loaded > last.loaded && (last.total === null || p.total === last.total);
        last = p;
        if (js !== null && events % 10 === 0) jsPeak = Math.max(jsPeak, jsHeap());

      },
    });
    const heapRise = (await lib.heapInfo()).heapTop - top;
    const out = await output(mha, config);
    return { memory: mha.memory, heapRise, jsRise: js === null ? null : jsPeak - js, events, monotone,
      loaded: last.loaded, total: last.total, output: out, info: lib.info };
  },

  // load()'s module of `which` library loaded again from `urls`, aborted once `fraction` of the
  // bytes arrived: { error: {name, isMHAError, message}, unchanged (outputs bit for bit, memory), at }.
  async abort(urls, config, prefix, fraction, which) {
    const mha = modules[which];
    const before = await output(mha, config);
    const memory = mha.memory;
    const controller = new AbortController();
    let at = 0;
    const responses = await Promise.all(urls.map((url) => fetch(url)));
    const error = await mha.loadSafetensors(responses, {
      prefix,
      signal: controller.signal,
      onProgress: ({ loaded, total }) => {
        if (at === 0 && loaded >= fraction * total) {
          at = loaded / total;
          controller.abort();
        }
      },
    }).then(() => null, (e) => ({ name: e.name, isMHAError: e instanceof MHAError, message: e.message }));
    const after = await output(mha, config);
    return { error, at, unchanged: mha.memory === memory && after.every((v, i) => Object.is(v, before[i])) };
  },
};
document.title = 'ready';

// The demo's engine: the package's library, run in its own Worker (the proxy), with the module of
// the last request kept while its modelKey stays the same, so only forwards are timed; and the
// decoding mode's KV cache of that module.
import { loadMHA } from '../src/browser.js';

let lib = null;
let model = null; // { key, mha }
let decoder = null; // { mha, cache }: the cache belongs to that module

// Loads the engine with `threads` threads (ending the previous one); resolves to lib.info.
export async function startEngine(threads) {
  stopEngine();
  lib = null;
  lib = await loadMHA({ threads, proxy: true });
  return lib.info;
}

export const engineRunning = () => lib !== null;

// A forward cannot be interrupted inside WASM: this ends the worker, its pending run fails, and
// the library's next call starts a new worker.
export function stopEngine() {
  lib?.terminate();
  model = null;
  decoder = null;
}

// The attention modules a .safetensors file holds (the engine reads its headers).
export const listAttentionModules = (bytes) => lib.listAttentionModules(bytes);

async function prepareModel({ modelKey, config, params }) {
  if (model?.key === modelKey) return model.mha;
  model?.mha.dispose();
  model = null;
  const mha = lib.createMultiheadAttention(config);
  try {
    if (params.kind === 'safetensors') await mha.loadSafetensors(params.bytes, params.load);
    else await mha.loadStateDict(params.tensors);
  } catch (error) {
    mha.dispose();
    throw error;
  }
  model = { key: modelKey, mha };
  return mha;
}

// One untimed warm-up forward, then `repeats` timed ones; resolves to the last result and the times.
export async function runRequest(request) {
  const { inputs: { query, key, value }, options, repeats } = request;
  try {
    const mha = await prepareModel(request);
    let result = await mha.forward(query, key, value, options);
    const timesMs = [];
    for (let i = 0; i < repeats; i++) {
      const start = performance.now();
      result = await mha.forward(query, key, value, options);
      timesMs.push(performance.now() - start);
    }
    return { output: result.output, weights: result.weights ?? null, timesMs };
  } catch (error) {
    // A bad setting or a stopped worker: start from a fresh module next time.
    model?.mha.dispose();
    model = null;
    throw error;
  }
}

// Forgets the decoding mode's cache (its keys and values are freed).
export function resetDecoder() {
  decoder?.cache.dispose();
  decoder = null;
}

// The decoding cache's bytes (cache.save()), or null when there is none.
export async function saveDecoder() {
  return decoder ? decoder.cache.save() : null;
}

// Makes the decoding cache the one saved in `bytes`, for the request's module: the next step
// continues where the saved cache was.
export async function restoreDecoder(request, bytes) {
  const mha = await prepareModel(request);
  const cache = await mha.loadKVCache(bytes);
  resetDecoder();
  decoder = { mha, cache };
}

// One decoding step: `token` ({ data, shape } with one row per batch entry) is projected,
// appended to the cache of the request's module (a new cache when the module or `cacheOptions`
// ({ batchSize, maxLength, rolling }) changed) and attends to every key the cache holds, with
// `extra` forward options (positions, keyPaddingMask). Resolves to its output, its weights
// (N, 1, T) averaged over heads, the cache's length T, held keys and bytes, and the milliseconds
// the forward took.
export async function decodeStep(request, token, cacheOptions, extra = {}) {
  const mha = await prepareModel(request);
  const same = decoder?.mha === mha && Object.entries(cacheOptions).every(([k, v]) => decoder.cache[k] === v);
  if (!same) {
    resetDecoder();
    decoder = { mha, cache: mha.createKVCache(cacheOptions) };
  }
  const { cache } = decoder;
  const options = { ...extra, cache, isCausal: true, needWeights: true, averageAttnWeights: true };
  const start = performance.now();
  const { output, weights } = await mha.forward(token, token, token, options);
  const timeMs = performance.now() - start;
  return { output, weights, length: cache.length, held: cache.held, bytes: cache.bytes, timeMs };
}

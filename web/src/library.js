// What loadMHA() resolves to: one instantiated WASM build and its thread pool.
import { callFrame } from './call_frame.js';
import { checkFloat32Option, checkOptionRule, windowOption } from './config.js';
import { callCore } from './core_call.js';
import { memoryBuffer } from './heap.js';
import { livesOf } from './lifetime.js';
import { forget } from './load_once.js';
import {
  KVCache, cachesOf, checkCache, checkCacheOptions, checkCacheSize, checkSavedBytes, loadedFrom,
} from './kv_cache.js';
import { MultiheadAttention } from './multihead_attention.js';
import {
  checkBoolean, checkKeyValue, checkMask, checkNumber, checkOptionsObject, checkPositiveInteger,
  checkTensor, describe,
} from './validate.js';
import { MHAError } from './errors.js';
import { returnPromises } from './promise_methods.js';
import { VERSION } from './version.js';
import { CheckpointReading, listSteps } from './safetensors_load.js';
import { runSteps } from './steps.js';
import { checkShards, copyHeader } from './weights.js';

const SDPA_KEYS = ['attnMask', 'isCausal', 'scale', 'softcap', 'window', 'sinks', 'alibiSlopes',
  'enableGqa', 'cache'];
const SDPA_CACHE_KEYS = ['numKVHeads', 'headDim', 'vHeadDim'];

// The JS-visible checks of scaledDotProductAttention (also run by the proxy's
// client, so that bad input is refused in the caller's thread); ours(cache):
// whether `cache` is a KVCache of this library.
export function checkSdpa(query, key, value, options, ours) {
  const o = checkOptionsObject(options, 'scaledDotProductAttention options', SDPA_KEYS);
  const cache = o.cache;
  checkTensor(query, 'query');
  checkKeyValue(key, value, cache);
  const attnMask = checkMask(o.attnMask, 'attnMask');
  // The core's rules (config.js's checkOptionRule), as the float32 it receives. A scale of 0,
  // the core's "default", is refused: JS asks for the default with undefined, and PyTorch's
  // scale=0 would be another call.
  for (const [name, unset] of [['scale', '1/sqrt(E)'], ['softcap', 'none']]) {
    if (o[name] === undefined) continue;
    if (checkNumber(o[name], name) === 0 && name === 'scale') {
      throw new MHAError('scale: expected a nonzero finite number (or undefined for 1/sqrt(E)), ' +
                         'received number 0');
    }
    checkOptionRule('sdpa', name, o[name], (message) => { throw new MHAError(message); });
    checkFloat32Option(o[name], name, unset, 'undefined');
  }
  const flags = {
    isCausal: checkBoolean(o.isCausal, 'isCausal', false),
    enableGqa: checkBoolean(o.enableGqa, 'enableGqa', false),
  };
  // The core takes 0 as "default".
  const window = windowOption(o.window);
  // One number per query head each: the core checks their length.
  const perHead = (name, what) => {
    if (o[name] === undefined) return undefined;
    if (!(o[name] instanceof Float32Array)) {
      throw new MHAError(`${name}: expected a Float32Array of one ${what} per query head, ` +
                         `received ${describe(o[name])}`);
    }
    return { data: o[name], shape: [o[name].length] };
  };
  return {
    attnMask, flags, cache: checkCache(cache, ours),
    sinks: perHead('sinks', 'logit'), alibiSlopes: perHead('alibiSlopes', 'slope'),
    numbers: { scale: o.scale ?? 0, softcap: o.softcap ?? 0, windowLeft: window.left,
      windowRight: window.right },
  };
}

// lib.createKVCache's options, checked as KVCache::Create would.
export function checkSdpaCache(options) {
  const checked = {
    ...checkCacheOptions(options, 'createKVCache', SDPA_CACHE_KEYS),
    numKVHeads: checkPositiveInteger(options.numKVHeads, 'numKVHeads'),
    headDim: checkPositiveInteger(options.headDim, 'headDim'),
    vHeadDim: checkPositiveInteger(options.vHeadDim ?? options.headDim, 'vHeadDim'),
  };
  if (typeof checked.rolling === 'object') {
    throw new MHAError('rolling.keep: a StreamingLLM cache is a module\'s ' +
                       '(mha.createKVCache: its rotary re-rotates the keys it moves)');
  }
  checked.bytes = checkCacheSize(checked, checked.numKVHeads, checked.headDim, checked.vHeadDim);
  return checked;
}

// The instance under a library, for the package's tests (not exported by
// the package's entry points).
export let wasmOf;
// listHeadersOf(lib, headers): listAttentionModules from the headers (the proxy's worker's).
export let listHeadersOf;

export class MHALibrary {
  // Private: the engine's instance is not the caller's to reach or change.
  #wasm;

  static {
    wasmOf = (lib) => lib.#wasm;
    listHeadersOf = (lib, headers) => lib.#listHeaders(headers);
  }

  // threadsOffReason: null, or why the single-thread build runs; relaxedSimd: the engine's probe.
  constructor(wasm, { build, threadsOffReason, relaxedSimd }) {
    this.#wasm = wasm;
    const core = wasm.info();
    // proxy: false here; a proxied library (proxy_client.js) says true.
    this.info = Object.freeze({
      version: VERSION,
      build,
      threads: core.threads,
      simd: core.target === 'WASM',
      relaxedSimd,
      target: core.target,
      gemmTile: core.gemmTile,
      proxy: false,
      threadsOffReason,
    });
  }

  // Its instantiated build; throws once disposed.
  live(what) {
    if (this.#wasm === null) {
      throw new MHAError(`${what}: expected a live library, received one that was disposed`);
    }
    return this.#wasm;
  }

  createMultiheadAttention(config) {
    return new MultiheadAttention(this.live('createMultiheadAttention'), config);
  }

  // A cache for scaledDotProductAttention: {batchSize, numKVHeads, headDim,
  // vHeadDim, maxLength, dtype: 'float32' | 'float16' | 'bfloat16', rolling}
  // (rolling: the calls that use it need a finite left window).
  createKVCache(options) {
    const wasm = this.live('createKVCache');
    const c = checkSdpaCache(options);
    return new KVCache(wasm, c, (cache, result) => cache.createFree({
      batch_size: c.batchSize, max_length: c.maxLength, dtype: c.dtype, rolling: c.rolling,
      num_kv_heads: c.numKVHeads, head_dim: c.headDim, v_head_dim: c.vHeadDim,
    }, result));
  }

  // A cache for scaledDotProductAttention from cache.save()'s bytes (of any
  // cache), continuing exactly where the saved one was.
  loadKVCache(bytes) {
    const saved = checkSavedBytes(bytes);
    return new KVCache(this.live('loadKVCache'), null, loadedFrom(saved, (cache, result, ptr, size) =>
      cache.loadFree(ptr, size, result)), 'loadKVCache');
  }

  // torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x): a bool
  // attnMask is true where a query MAY attend.
  scaledDotProductAttention(query, key, value, options) {
    const wasm = this.live('scaledDotProductAttention');
    const { attnMask, flags, numbers, cache, sinks, alibiSlopes } = checkSdpa(query, key, value,
      options, cachesOf(wasm));
    return callFrame(wasm, 'scaledDotProductAttention',
      { query, key, value, attnMask, sinks, alibiSlopes }, flags, numbers,
      // Checked again: the copy reads each tensor's getters once more.
      (frame, result) => wasm.scaledDotProductAttention(frame,
        cache?.checkAlive('cache') ?? null, result)).output;
  }

  // The attention modules a checkpoint (one .safetensors file's bytes, Blob,
  // Response or ReadableStream, or its shards) holds: [{prefix, layout, names, embedDim, kdim, vdim, qSize,
  // kSize, vSize, bias, biasKV}] from the names and shapes in its headers
  // (only the headers are read). The number of heads is in
  // none of them: it comes from the model's config (num_attention_heads).
  listAttentionModules(bytes) {
    const name = 'listAttentionModules';
    this.live(name);
    return runSteps(listSteps(new CheckpointReading(name, checkShards(bytes, name)),
      (headers) => this.#listHeaders(headers)));
  }

  // listAttentionModules from the shards' headers (copyHeader's); the proxy's
  // worker receives them from the caller's thread (proxy_worker.js).
  #listHeaders(headers) {
    const name = 'listAttentionModules';
    // The library may have been disposed during a wait.
    const wasm = this.live(name);
    return callCore(wasm, name, (heap, result) =>
      wasm.listAttentionModules(headers.map((header) => copyHeader(heap, header)), result));
  }

  // Diagnostics: the WASM heap's top (sbrk), bytes malloc'd, memory size.
  heapInfo() {
    const wasm = this.live('heapInfo');
    const { heapTop, inUseBytes } = wasm.heapInfo();
    return { heapTop, inUseBytes, memoryBytes: memoryBuffer(wasm).byteLength };
  }

  // Frees the library: the modules and caches made from it (disposed), its
  // thread pool's Workers (ended) and its memory (left to the collector).
  // A second call does nothing; loadMHA() then loads afresh.
  dispose() {
    if (this.#wasm === null) return;
    forget(this);
    for (const life of [...livesOf(this.#wasm)]) life.end(true);
    // The Workers themselves, not Emscripten's terminateAllThreads(), which first frees each
    // running thread's stack in the heap while that thread may still be starting on it.
    const pool = this.#wasm.PThread;
    if (pool) for (const worker of [...pool.unusedWorkers, ...pool.runningWorkers]) worker.terminate();
    this.#wasm = null;
  }
}

// Promises in both modes (through the proxy they cannot finish
// synchronously): every error, bad input included, rejects.
returnPromises(MHALibrary, ['scaledDotProductAttention', 'listAttentionModules', 'heapInfo',
  'loadKVCache']);

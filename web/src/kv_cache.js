// The JS face of mha::KVCache (see docs/design.md, "Decoding: KV cache,
// grouped-query heads, rotary positions"): keys and values kept across
// forward calls, all memory allocated at creation.
import { returnBlock, takeBlock } from './call_frame.js';
import { STATUS_OK, callCore, checkStatus, newBinding, sharedResult } from './core_call.js';
import { MHAError } from './errors.js';
import { heapViews } from './heap.js';
import { Lifetime, livesOf } from './lifetime.js';
import { LIMITS } from './option_rules.js';
import { returnPromises } from './promise_methods.js';
import {
  checkBoolean, checkChoice, checkOptionsObject, checkPositiveInteger, describe,
} from './validate.js';

// The dtypes and the bytes of one stored element.
const ELEMENT_BYTES = { float32: 4, float16: 2, bfloat16: 2 };

// {batchSize, maxLength, dtype, rolling} (+ the functional form's `extraKeys`).
export function checkCacheOptions(options, name, extraKeys = []) {
  if (options === undefined) {
    throw new MHAError(`${name}: expected an options object with batchSize and maxLength, ` +
                       'received undefined');
  }
  const o = checkOptionsObject(options, name,
    ['batchSize', 'maxLength', 'dtype', 'rolling', ...extraKeys]);
  const dtype = checkChoice(o.dtype ?? undefined, 'dtype', Object.keys(ELEMENT_BYTES));
  return {
    batchSize: checkPositiveInteger(o.batchSize, 'batchSize'),
    maxLength: checkPositiveInteger(o.maxLength, 'maxLength'),
    dtype,
    rolling: checkRolling(o.rolling, o.maxLength),
  };
}

// rolling: true or false, or { keep } (a StreamingLLM cache: keep in [0, maxLength - 1]).
function checkRolling(rolling, maxLength) {
  if (rolling === null || typeof rolling !== 'object') return checkBoolean(rolling, 'rolling', false);
  const { keep } = checkOptionsObject(rolling, 'rolling', ['keep']);
  // keep >= maxLength is the core's check (config.js checkModuleCacheOptions mirrors its order).
  if (!Number.isSafeInteger(keep) || keep < 0) {
    throw new MHAError(`rolling.keep: expected an integer in [0, maxLength - 1] = [0, ${maxLength - 1}] ` +
                       `(the keys kept as sinks), received ${describe(keep)}`);
  }
  return { keep };
}

// The keep of checked `rolling` (checkRolling's), -1 for none, as the core takes it.
export const keepOf = (rolling) => (typeof rolling === 'object' ? rolling.keep : -1);

// A cache of `numKVHeads` heads of headDim-wide keys and vHeadDim-wide
// values: the bytes its storage takes (KVCache::bytes), when addressable.
// KVCache::CreateOwned refuses one whose storage would not fit in the address
// space (tensor.cc's Addressable) before allocating anything; as it computes,
// in doubles.
export function checkCacheSize({ batchSize, maxLength, dtype }, numKVHeads, headDim, vHeadDim) {
  const bytes = batchSize * maxLength * numKVHeads * (headDim + vHeadDim) * ELEMENT_BYTES[dtype];
  if (!(bytes < LIMITS.addressSpace) || maxLength > LIMITS.maxCacheLength) {
    throw new MHAError(`createKVCache: cache: out of memory for batch_size ${batchSize} and max_length ` +
                       `${maxLength}: its storage would exceed the address space`);
  }
  return bytes;
}

// truncate(n): n's type. Whether the cache holds n keys is the core's check
// (through the proxy the length is not known synchronously).
export function checkTruncate(n) {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new MHAError(`truncate: expected a length (an integer >= 0), received ${describe(n)}`);
  }
}

// reorder(indices): an Int32Array of batchSize entries. Whether each is in
// [0, batchSize) is the core's check.
export function checkReorder(indices, batchSize) {
  if (!(indices instanceof Int32Array)) {
    throw new MHAError(`reorder: indices: expected an Int32Array of batchSize (${batchSize}) ` +
                       `entries, received ${describe(indices)}`);
  }
  if (indices.length !== batchSize) {
    throw new MHAError(`reorder: indices: expected batchSize (${batchSize}) entries, received ` +
                       `${indices.length}`);
  }
}

// select(indices): an Int32Array of at least one entry. Whether each is in
// [0, batchSize) is the core's check.
export function checkSelect(indices) {
  if (!(indices instanceof Int32Array) || indices.length === 0) {
    throw new MHAError('select: indices: expected an Int32Array of at least one entry (the ' +
                       `new cache's batch size), received ${describe(indices)}`);
  }
}

// resize(maxLength): its type. Whether the cache holds more is the core's check.
export function checkResize(maxLength) {
  checkPositiveInteger(maxLength, 'resize: maxLength');
}

// loadKVCache(bytes): what cache.save() gave, as a Uint8Array or its ArrayBuffer.
export function checkSavedBytes(bytes) {
  if (!(bytes instanceof Uint8Array || bytes instanceof ArrayBuffer)) {
    throw new MHAError('loadKVCache: bytes: expected a Uint8Array (or ArrayBuffer) from ' +
                       `cache.save(), received ${describe(bytes)}`);
  }
  return bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : bytes;
}

// A cache's binding filled by `load` (binding, result, bytes address, size)
// => status from saved `bytes` (checkSavedBytes'), copied into the heap for it.
export const loadedFrom = (bytes, load) => (binding, result, heap) =>
  load(binding, result, heap.copyIn(bytes), bytes.byteLength);

export class KVCache {
  // Use mha.createKVCache(options) or lib.createKVCache(options). `options`
  // are the checked {batchSize, maxLength, dtype, rolling}, which its getters
  // answer (as the proxy's client does), or null for the new binding's own
  // (a loaded or selected cache); `create` fills the new binding
  // (binding, result, heap) => status; `what` names the call in errors.
  constructor(wasm, options, create, what = 'createKVCache') {
    this.wasm = wasm;
    const binding = newBinding(wasm, wasm.KVCache, what, create);
    this.life = new Lifetime(this, 'KVCache', binding, undefined, livesOf(wasm));
    this.options = options ?? binding.config();
  }

  // Its binding; throws once disposed.
  checkAlive(what) {
    return this.life.check(what);
  }

  /** Positions appended per batch entry (P: what masks and weights span). */
  get length() { return this.checkAlive('cache.length').length(); }
  /** Keys in memory per batch entry: length, or at most maxLength when rolling. */
  get held() { return this.checkAlive('cache.held').held(); }
  /**
   * Per batch entry, the pad slots it remembers from the key padding mask given at its
   * prefill (its leading masked slots): later calls keep them masked and count rotary
   * positions from the first real token.
   */
  get padding() { return this.checkAlive('cache.padding').padding(); }
  get rolling() { return this.option('rolling'); }
  get maxLength() { return this.option('maxLength'); }
  get batchSize() { return this.option('batchSize'); }
  get dtype() { return this.option('dtype'); }
  /** Bytes its keys and values take (all allocated at creation). */
  get bytes() { return this.checkAlive('cache.bytes').bytes(); }

  // What JSON.stringify and console.log show: a small summary, at once.
  toJSON() {
    if (this.life.held === null) return { disposed: true };
    const { batchSize, maxLength, dtype, rolling } = this.options;
    return { batchSize, maxLength, dtype, rolling, length: this.length, held: this.held,
      bytes: this.bytes };
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return `KVCache ${JSON.stringify(this)}`;
  }

  option(key) {
    this.checkAlive(`cache.${key}`);
    return this.options[key];
  }

  // Keeps the first n keys (0 <= n <= length; rolling: the keys n - left ..
  // n - 1 still held).
  truncate(n) {
    const binding = this.checkAlive('truncate');
    checkTruncate(n);
    const result = sharedResult(this.wasm);
    checkStatus(binding.truncate(n, result), result, 'truncate');
  }

  reset() {
    this.checkAlive('reset');
    return this.truncate(0);
  }

  // Beam search: entry b becomes the old entry indices[b]. The indices go
  // through the scratch block of call frames, so that a reorder allocates
  // nothing.
  reorder(indices) {
    const binding = this.checkAlive('reorder');
    checkReorder(indices, this.options.batchSize);
    const bytes = indices.byteLength;
    const block = takeBlock(this.wasm, bytes);
    const result = sharedResult(this.wasm);
    try {
      heapViews(this.wasm, block + bytes).u8.set(
        new Uint8Array(indices.buffer, indices.byteOffset, bytes), block);
      checkStatus(binding.reorder(block, indices.length, result), result, 'reorder');
    } finally {
      returnBlock(this.wasm, block, bytes);
    }
  }

  // Its config, length and held keys and values as bytes (docs/kv-cache-format.md),
  // for mha.loadKVCache / lib.loadKVCache: a Uint8Array the caller owns.
  save() {
    const binding = this.checkAlive('save');
    let saved;
    callCore(this.wasm, 'save', (heap, result) => {
      const code = binding.save(result);
      if (code === STATUS_OK) {
        const { ptr, size } = result.value();
        saved = new Uint8Array(size);
        saved.set(heapViews(this.wasm, ptr + size).u8.subarray(ptr, ptr + size));
      }
      return code;
    });
    return saved;
  }

  // A new cache whose entry b is this one's entry indices[b] (any number of
  // entries: one prompt to four beams is [0, 0, 0, 0]).
  select(indices) {
    const binding = this.checkAlive('select');
    checkSelect(indices);
    return new KVCache(this.wasm, null, (selected, result, heap) =>
      binding.select(selected, heap.copyIn(indices), indices.length, result), 'select');
  }

  // A new cache with the same keys, values and length.
  clone() {
    const binding = this.checkAlive('clone');
    return new KVCache(this.wasm, null, (copy, result) => binding.clone(copy, result), 'clone');
  }

  // Makes its maxLength `maxLength` (>= held), in place.
  resize(maxLength) {
    const binding = this.checkAlive('resize');
    checkResize(maxLength);
    const result = sharedResult(this.wasm);
    checkStatus(binding.resize(maxLength, result), result, 'resize');
    this.options = { ...this.options, maxLength };
  }

  dispose() {
    this.life.end();
  }
}

// Promises in both modes (through the proxy the cache's length is not known
// synchronously): every error, bad input included, rejects.
returnPromises(KVCache, ['truncate', 'reset', 'reorder', 'save', 'select', 'clone', 'resize']);

// checkCache's `ours` in the calling thread: the caches of one WASM instance.
export const cachesOf = (wasm) => (cache) => cache instanceof KVCache && cache.wasm === wasm;

// options.cache for forward / scaledDotProductAttention: undefined, or a live
// cache that `ours(cache)` accepts (returned; null and undefined: undefined).
export function checkCache(cache, ours) {
  if (cache === undefined || cache === null) return undefined;
  if (!ours(cache)) {
    throw new MHAError('cache: expected a KVCache from createKVCache of this library, ' +
                       `received ${describe(cache)}`);
  }
  cache.checkAlive('cache');
  return cache;
}

// The JS face of mha::KVCache (see DESIGN.md, "Decoding: KV cache,
// grouped-query heads, rotary positions"): keys and values kept across
// forward calls, all memory allocated at creation.
import { callCore, checkStatus, sharedResult } from './core_call.js';
import { MHAError } from './errors.js';
import { settle } from './settle.js';
import { checkOptionsObject, checkPositiveInteger, describe } from './validate.js';

const DTYPES = ['float32', 'float16'];

// Frees the C++ cache of a KVCache the user forgot to dispose.
const forgotten = new FinalizationRegistry((binding) => binding.delete());

// {batchSize, maxLength, dtype} (+ the functional form's `extraKeys`).
export function checkCacheOptions(options, name, extraKeys = []) {
  if (options === undefined) {
    throw new MHAError(`${name}: expected an options object with batchSize and maxLength, ` +
                       'received undefined');
  }
  const o = checkOptionsObject(options, name, ['batchSize', 'maxLength', 'dtype', ...extraKeys]);
  const dtype = o.dtype ?? 'float32';
  if (!DTYPES.includes(dtype)) {
    throw new MHAError(`dtype: expected 'float32' or 'float16', received ${describe(dtype)}`);
  }
  return {
    batchSize: checkPositiveInteger(o.batchSize, 'batchSize'),
    maxLength: checkPositiveInteger(o.maxLength, 'maxLength'),
    dtype,
  };
}

// truncate(n) on a cache holding `length` keys (unknown: undefined).
export function checkTruncate(n, length) {
  if (!Number.isSafeInteger(n) || n < 0 || (length !== undefined && n > length)) {
    throw new MHAError(`truncate: expected a length in [0, ${length ?? 'length'}], ` +
                       `received ${describe(n)}`);
  }
}

export class KVCache {
  // Use mha.createKVCache(options) or lib.createKVCache(options). `create`
  // fills the new binding (binding, result) => status.
  constructor(wasm, create) {
    this.wasm = wasm;
    const binding = new wasm.KVCache();
    try {
      callCore(wasm, 'createKVCache', (heap, result) => create(binding, result));
    } catch (error) {
      binding.delete();
      throw error;
    }
    this.binding = binding;
    forgotten.register(this, binding, this);
  }

  checkAlive(what) {
    if (this.binding === null) {
      throw new MHAError(`${what}: expected a live KVCache, received one that was disposed`);
    }
    return this.binding;
  }

  /** Keys held per batch entry. */
  get length() { return this.checkAlive('cache.length').length(); }
  get maxLength() { return this.checkAlive('cache.maxLength').maxLength(); }
  get batchSize() { return this.checkAlive('cache.batchSize').batchSize(); }
  get dtype() { return this.checkAlive('cache.dtype').dtype(); }

  // Keeps the first n keys (0 <= n <= length). A Promise, as through the
  // proxy; bad input throws.
  truncate(n) {
    const binding = this.checkAlive('truncate');
    checkTruncate(n, binding.length());
    return settle(() => {
      const result = sharedResult(this.wasm);
      checkStatus(binding.truncate(n, result), result, 'truncate');
    });
  }

  reset() { return this.truncate(0); }

  dispose() {
    if (this.binding === null) return;
    forgotten.unregister(this);
    this.binding.delete();
    this.binding = null;
  }
}

// options.cache for forward / scaledDotProductAttention: undefined, or a live
// KVCache of this library's build (returned; null and undefined: undefined).
export function checkCache(cache, wasm) {
  if (cache === undefined || cache === null) return undefined;
  if (!(cache instanceof KVCache) || cache.wasm !== wasm) {
    throw new MHAError('cache: expected a KVCache from createKVCache of this library, ' +
                       `received ${describe(cache)}`);
  }
  cache.checkAlive('cache');
  return cache;
}

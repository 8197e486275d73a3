// What the proxy forwards to its worker, class by class. Adding a proxied
// method or class is an entry here; proxy_client.js and proxy_worker.js are
// generic. Per class:
//   calls:   methods that run in the worker and resolve to their result, each
//            with the JS-visible check the in-thread method runs first (so
//            bad input is refused in the caller's thread, nothing sent), or
//            null; like the in-thread ones, they never throw: errors reject;
//   creates: methods that return a new proxied object synchronously (its
//            class and check, whose result the client keeps as `checked`);
//            it lives in the worker and is sent as a handle;
//   loads:   methods whose Promise resolves to a new proxied object (its
//            class and check, or null), made in the worker first: its
//            getters are all read there (a loaded cache's are known only then);
//   getters: its properties, answered by the client from `state`:
//   known:   their values from its creating check's result alone, as the
//            in-thread class has them (so known at once);
//   mirror:  those that calls change: read again in the worker after every
//            call that involves the object and copied to the client;
//   disposable: whether it has dispose() (frees it in the worker);
//   name, noun: what it is called in messages ('cache.length'; a disposed
//            KVCache).
// The checks receive the client object first (its `checked` and `state`;
// `self.ours`: whether a value is a proxied KVCache of the same worker).
import { checkModuleCacheOptions, checkConfig, parametersOf } from './config.js';
import { MHAError } from './errors.js';
import {
  checkReorder, checkResize, checkSavedBytes, checkSelect, checkTruncate,
} from './kv_cache.js';
import { checkSdpa, checkSdpaCache } from './library.js';
import { checkShards } from './weights.js';
import {
  checkForward, checkLoadSafetensors, checkLoadStateDict,
} from './multihead_attention.js';

// The proxy sends a checkpoint as bytes only so far: a Blob, Response or
// stream, onProgress and signal would need its channel to carry them (they
// do not clone), so they are refused in the caller's thread.
function bytesOnly(name, shards, { onProgress, signal } = {}) {
  if (shards.some((shard) => !(shard instanceof Uint8Array)) || onProgress || signal) {
    throw new MHAError(`${name}: through the proxy (threaded builds in a page), a checkpoint ` +
      'goes as bytes (Uint8Array or ArrayBuffer) without onProgress or signal for now; to ' +
      'stream a Blob, Response or ReadableStream, use the package inside your own Worker');
  }
}

// A new cache's getters, from its checked {batchSize, maxLength, dtype, bytes, rolling}.
const newCache = ({ batchSize, maxLength, dtype, bytes, rolling }) =>
  ({ length: 0, held: 0, maxLength, batchSize, dtype, bytes, rolling });

export const PROXIED = {
  MHALibrary: {
    calls: {
      scaledDotProductAttention: (self, q, k, v, options) => checkSdpa(q, k, v, options, self.ours),
      heapInfo: null,
      listAttentionModules: (self, bytes) =>
        bytesOnly('listAttentionModules', checkShards(bytes, 'listAttentionModules')),
    },
    creates: {
      createMultiheadAttention: { type: 'MultiheadAttention', check: (self, config) => checkConfig(config) },
      createKVCache: { type: 'KVCache', check: (self, options) => checkSdpaCache(options) },
    },
    loads: {
      loadKVCache: { type: 'KVCache', check: (self, bytes) => checkSavedBytes(bytes) },
    },
    getters: [],
    known: null,
    mirror: [],
    disposable: false,
    noun: 'library',
  },
  MultiheadAttention: {
    calls: {
      // Bare Float32Arrays are checked against the module's parameters.
      loadStateDict: (self, stateDict, options) =>
        checkLoadStateDict(stateDict, options, self.state.parameters),
      loadSafetensors: (self, bytes, options) => {
        const { shards, read } = checkLoadSafetensors(bytes, options);
        bytesOnly('loadSafetensors', shards, read);
      },
      forward: (self, q, k, v, options) => checkForward(q, k, v, options, self.ours),
    },
    creates: {
      createKVCache: {
        type: 'KVCache', check: (self, options) => checkModuleCacheOptions(self.checked, options),
      },
    },
    loads: {
      loadKVCache: { type: 'KVCache', check: (self, bytes) => checkSavedBytes(bytes) },
    },
    getters: ['parameters', 'memory'],
    known: (config) => ({ parameters: parametersOf(config), memory: 0 }),
    // Loads change it.
    mirror: ['memory'],
    disposable: true,
    name: 'mha',
    noun: 'module',
  },
  KVCache: {
    calls: {
      truncate: (self, n) => checkTruncate(n),
      reset: null,
      reorder: (self, indices) => checkReorder(indices, self.state.batchSize),
      save: null,
      resize: (self, maxLength) => checkResize(maxLength),
    },
    creates: {},
    loads: {
      select: { type: 'KVCache', check: (self, indices) => checkSelect(indices) },
      clone: { type: 'KVCache', check: null },
    },
    getters: ['length', 'held', 'maxLength', 'batchSize', 'dtype', 'bytes', 'rolling'],
    known: newCache,
    // Calls that take the cache (forward, scaledDotProductAttention) change
    // them; resize, maxLength and bytes.
    mirror: ['length', 'held', 'maxLength', 'bytes'],
    disposable: true,
    name: 'cache',
    noun: 'KVCache',
  },
};

// Marks a proxied object in a message: { [HANDLE]: id }.
export const HANDLE = '__mhaHandle';

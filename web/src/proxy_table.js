// What the proxy forwards to its worker, class by class. Adding a proxied
// method or class is an entry here; proxy_client.js and proxy_worker.js are
// generic. Per class:
//   calls:   methods that run in the worker and resolve to their result, each
//            with the JS-visible check the in-thread method runs first (so
//            bad input throws in the caller's thread too), or null;
//   creates: methods that return a new proxied object synchronously (its
//            class and check); it lives in the worker and is sent as a handle;
//   state:   properties read once when the object is created, and
//   mirror:  properties read again after every call that involves the object,
//            both copied to the client for synchronous getters;
//   disposable: whether it has dispose() (frees it in the worker);
//   noun:    what a disposed one is called in messages.
// The checks receive the client object first (its `state` is null until the
// worker has created the object).
import { checkCacheOptions, checkTruncate } from './kv_cache.js';
import { checkSdpa, checkSdpaCache } from './library.js';
import { checkShards } from './weights.js';
import {
  checkConfig, checkForward, checkLoadSafetensors, checkLoadStateDict,
} from './multihead_attention.js';

export const PROXIED = {
  MHALibrary: {
    calls: {
      scaledDotProductAttention: (self, ...args) => checkSdpa(...args),
      heapInfo: null,
      listAttentionModules: (self, bytes) => checkShards(bytes, 'listAttentionModules'),
    },
    creates: {
      createMultiheadAttention: { type: 'MultiheadAttention', check: (self, config) => checkConfig(config) },
      createKVCache: { type: 'KVCache', check: (self, options) => checkSdpaCache(options) },
    },
    state: [],
    mirror: [],
    disposable: false,
    noun: 'library',
  },
  MultiheadAttention: {
    calls: {
      // Bare Float32Arrays are checked against `parameters`, known once created.
      loadStateDict: (self, stateDict, options) =>
        self.state && checkLoadStateDict(stateDict, options, self.state.parameters),
      loadSafetensors: (self, bytes, options) => checkLoadSafetensors(bytes, options),
      forward: (self, ...args) => checkForward(...args),
    },
    creates: {
      createKVCache: {
        type: 'KVCache', check: (self, options) => checkCacheOptions(options, 'createKVCache'),
      },
    },
    state: ['parameters'],
    mirror: [],
    disposable: true,
    noun: 'module',
  },
  KVCache: {
    calls: {
      truncate: (self, n) => checkTruncate(n, self.state?.length),
      reset: null,
    },
    creates: {},
    state: ['maxLength', 'batchSize', 'dtype'],
    // Calls that take the cache (forward, scaledDotProductAttention) change it.
    mirror: ['length'],
    disposable: true,
    noun: 'KVCache',
  },
};

// Marks a proxied object in a message: { [HANDLE]: id }.
export const HANDLE = '__mhaHandle';

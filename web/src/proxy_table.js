// What the proxy forwards to its worker, class by class. Adding a proxied
// method or class is an entry here; proxy_client.js and proxy_worker.js are
// generic, but for the calls that read a checkpoint in the caller's thread
// (their READS and STEPS). Per class:
//   calls:   methods that run in the worker and resolve to their result, each
//            with the JS-visible check the in-thread method runs first (so
//            bad input is refused in the caller's thread, nothing sent), or
//            null; like the in-thread ones, they never throw: errors reject;
//            those that read a checkpoint read it in the caller's thread
//            (proxy_client.js, READS) and send the worker steps (STEP);
//   sends:   for some calls, what is sent in place of the arguments, from the check's result and
//            the arguments: only what the worker's method uses (the in-thread method given
//            these sees what it would have seen of the originals);
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
//            call that involves the object and copied to the client (an array is
//            copied again at each read, as in-thread each read asks the core);
//   disposable: whether it has dispose() (frees it in the worker);
//   name, noun: what it is called in messages ('cache.length'; a disposed
//            KVCache).
// The checks receive the client object first (its `checked` and `state`;
// `self.ours`: whether a value is a proxied KVCache of the same worker).
import * as errors from './errors.js';
import { checkModuleCacheOptions, checkConfig } from './config.js';
import {
  checkReorder, checkResize, checkSavedBytes, checkSelect, checkTruncate,
} from './kv_cache.js';
import { checkSdpa, checkSdpaCache } from './library.js';
import { checkShards } from './weights.js';
import {
  checkForward, checkLoadSafetensors, checkLoadStateDict, parameterSpecs,
} from './multihead_attention.js';

// A new cache's getters, from its checked {batchSize, maxLength, dtype, bytes, rolling}.
const newCache = ({ batchSize, maxLength, dtype, bytes, rolling }) =>
  ({ length: 0, held: 0, padding: new Array(batchSize).fill(0), maxLength, batchSize, dtype, bytes,
    rolling });

export const PROXIED = {
  MHALibrary: {
    calls: {
      scaledDotProductAttention: (self, q, k, v, options) => checkSdpa(q, k, v, options, self.ours),
      heapInfo: null,
      listAttentionModules: (self, bytes) => checkShards(bytes, 'listAttentionModules'),
    },
    sends: {},
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
      loadSafetensors: (self, bytes, options) => checkLoadSafetensors(bytes, options),
      forward: (self, q, k, v, options) => checkForward(q, k, v, options, self.ours),
    },
    sends: {
      // The tensors under the prefix; the others by shape alone (the error that lists the
      // nearest modules needs no more); entries that are not tensors, not at all.
      loadStateDict: ({ options, inside, outside }) => [Object.fromEntries([...inside,
        ...outside.map(([key, { shape }]) => [key, { data: new Float32Array(shape.length ? 0 : 1), shape }])]),
      options],
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
    known: (config) => ({ parameters: parameterSpecs(config), memory: 0 }),
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
    sends: {},
    creates: {},
    loads: {
      select: { type: 'KVCache', check: (self, indices) => checkSelect(indices) },
      clone: { type: 'KVCache', check: null },
    },
    getters: ['length', 'held', 'padding', 'maxLength', 'batchSize', 'dtype', 'bytes', 'rolling'],
    known: newCache,
    // Calls that take the cache (forward, scaledDotProductAttention) change
    // them; resize, maxLength and bytes; truncate, reorder and reset padding.
    mirror: ['length', 'held', 'padding', 'maxLength', 'bytes'],
    disposable: true,
    name: 'cache',
    noun: 'KVCache',
  },
};

// Marks a proxied object in a message: { [HANDLE]: id }.
export const HANDLE = '__mhaHandle';
// Marks a call's typed array in a message: { [ARRAY]: index } (proxy_client.js, proxy_worker.js).
export const ARRAY = '__mhaArray';
// The method name of a step of a call whose checkpoint the client reads (proxy_client.js, READS;
// proxy_worker.js, STEPS): only the headers and the tensors the core takes go to the worker.
export const STEP = '__mhaStep';

// Only arrays of these builtin types are staged (a view of the same type is made in the worker);
// any other view in a call (a subclass, a DataView) sends the whole call by clone.
const TYPES = new Set(['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array',
  'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array']);

export function builtinType(array) {
  const name = array.constructor?.name;
  return TYPES.has(name) && Object.getPrototypeOf(array) === globalThis[name].prototype ? name : null;
}

// An error as a message carries it, and back: the package's error classes (errors.js) and the
// language's (TypeError, RangeError, ...) arrive as the same class, with the same message.
export const errorFields = (error) =>
  ({ name: error?.name ?? 'Error', message: error?.message ?? String(error) });

export function errorFrom({ name, message }) {
  const Type = Object.hasOwn(errors, name) ? errors[name] : globalThis[name];
  const known = typeof Type === 'function' && (Type === Error || Type.prototype instanceof Error);
  return known ? new Type(message) : Object.assign(new Error(message), { name });
}

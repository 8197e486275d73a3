// The JS face of mha::MultiheadAttention (see docs/design.md, "JavaScript API").
import { callFrame } from './call_frame.js';
import { callCore, newBinding } from './core_call.js';
import { MHAError } from './errors.js';
import { checkConfig, checkModuleCacheOptions, parametersOf, resolvedDims } from './config.js';
import { KVCache, cachesOf, checkCache, checkSavedBytes, keepOf, loadedFrom } from './kv_cache.js';
import { Lifetime, livesOf } from './lifetime.js';
import { returnPromises } from './promise_methods.js';
import { runSteps } from './steps.js';
import {
  checkBoolean, checkKeyValue, checkMask, checkOptionsObject, checkTensor, describe,
} from './validate.js';
import { CheckpointReading, CoreLoad, checkReadOptions, loadSteps } from './safetensors_load.js';
import { checkShards, checkStateDictEntries, checkWeightOptions } from './weights.js';

const FORWARD_KEYS = ['keyPaddingMask', 'attnMask', 'needWeights', 'averageAttnWeights',
  'isCausal', 'cache', 'positions'];

// positions: undefined, or an Int32Array (its length, rotary and the key
// rows are the core's checks: it rejects).
function checkPositions(positions) {
  if (positions === undefined) return undefined;
  if (!(positions instanceof Int32Array)) {
    throw new MHAError('positions: expected an Int32Array of N * L rotary positions ' +
                       `(batch-major), received ${describe(positions)}`);
  }
  return { data: positions, shape: [positions.length] };
}

// The checks below are the JS-visible ones, also run by the proxy's client so
// that bad input is refused in the caller's thread.

// { options, entries }: the core's weight options and the state_dict's
// entries ([name, tensor] under the prefix, [name, {shape}] elsewhere);
// `parameters`: the module's.
export function checkLoadStateDict(stateDict, options, parameters) {
  const name = 'loadStateDict';
  const o = checkWeightOptions(options, name);
  if (stateDict === null || typeof stateDict !== 'object' || ArrayBuffer.isView(stateDict)) {
    throw new MHAError(`${name}: expected an object {name: tensor}, received ` +
                       describe(stateDict));
  }
  const shapes = new Map(parameters.map((p) => [o.prefix + p.name, p.shape]));
  const { inside, outside } = checkStateDictEntries(stateDict, o.prefix, shapes, name);
  return { options: o, inside, outside };
}

// { options, shards, read }: the core's weight options, the checked sources
// and the reading's { onProgress, signal }.
export function checkLoadSafetensors(bytes, options) {
  const name = 'loadSafetensors';
  return { options: checkWeightOptions(options, name, ['onProgress', 'signal']),
    shards: checkShards(bytes, name), read: checkReadOptions(options, name) };
}

// ours(cache): whether `cache` is a KVCache of this library (checkCache).
// The cache is checked last, after every getter of the arguments has run.
export function checkForward(query, key, value, options, ours) {
  const o = checkOptionsObject(options, 'forward options', FORWARD_KEYS);
  const cache = o.cache;
  checkTensor(query, 'query');
  checkKeyValue(key, value, cache);
  return {
    keyPaddingMask: checkMask(o.keyPaddingMask, 'keyPaddingMask'),
    attnMask: checkMask(o.attnMask, 'attnMask'),
    positions: checkPositions(o.positions),
    flags: {
      needWeights: checkBoolean(o.needWeights, 'needWeights', true),
      averageAttnWeights: checkBoolean(o.averageAttnWeights, 'averageAttnWeights', true),
      isCausal: checkBoolean(o.isCausal, 'isCausal', false),
    },
    cache: checkCache(cache, ours),
  };
}

// coreLoadOf(mha, options): the core's side of a load into `mha` (a CoreLoad),
// for loadSafetensors here and in the proxy's worker (proxy_worker.js).
export let coreLoadOf;
// shownLoad(mha): a Promise settling once mha.memory shows the load just finished in it (the
// proxy's worker, whose client's load settles with that reply).
export let shownLoad;

// mha.parameters of a module of core config `c`, in both modes (the proxy's client knows it from
// the config): frozen all the way down, as callers read it and nothing changes it.
export const parameterSpecs = (c) => Object.freeze(parametersOf(c).map(({ name, shape }) =>
  Object.freeze({ name, shape: Object.freeze([...shape]) })));

export class MultiheadAttention {
  // Private: what the engine runs on is not the caller's to reach or change.
  #wasm;
  #config;
  #life;
  #parameters;
  #memory = 0;

  // Use lib.createMultiheadAttention(config).
  constructor(wasm, config) {
    this.#wasm = wasm;
    // The core's config, checked as the core checks it.
    this.#config = checkConfig(config);
    this.#life = new Lifetime(this, 'module', newBinding(wasm, wasm.MultiheadAttention,
      'createMultiheadAttention', (binding, result) => binding.create(this.#config, result)),
      undefined, livesOf(wasm));
    this.#parameters = parameterSpecs(this.#config);
  }

  // [{name, shape}], frozen: the state_dict entries this configuration has.
  get parameters() {
    this.checkAlive('mha.parameters');
    return this.#parameters;
  }

  // Bytes the weights take in their dtype (0 before a load), as of the last load whose Promise
  // has settled: a pending load, from bytes or streamed, shows once it settles, as through the
  // proxy, whose reply brings it (docs/design.md, "Precision: weights and caches in fewer bytes").
  get memory() {
    this.checkAlive('mha.memory');
    return this.#memory;
  }

  // A load's Promise, settling once `memory` shows what the load (`loading`: its result, or its
  // Promise) left.
  #shown(loading) {
    if (loading instanceof Promise) return loading.then(() => this.#shown());
    const memory = this.#life.held?.memory() ?? this.#memory;
    return Promise.resolve().then(() => { this.#memory = memory; });
  }

  // Its binding; throws once disposed.
  checkAlive(what) {
    return this.#life.check(what);
  }

  // What JSON.stringify and console.log show: a small summary, at once.
  toJSON() {
    if (this.#life.held === null) return { disposed: true };
    const c = this.#config;
    return { embedDim: c.embed_dim, numHeads: c.num_heads, numKVHeads: resolvedDims(c).numKVHeads,
      weightsDtype: c.weights_dtype, memory: this.memory };
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return `MultiheadAttention ${JSON.stringify(this)}`;
  }

  // state_dict: {name: Float32Array | {data, shape}}; the module under
  // options.prefix in any layout (docs/design.md, "Weights from the modules people
  // have"): detected, or forced with options.layout / options.names. A bare
  // Float32Array has its parameter's shape for nn.MultiheadAttention's names
  // (in_proj_weight and q/k/v_proj_weight may stand for each other when
  // kdim == vdim == embedDim: give those as {data, shape}), else 1-D. Only
  // the entries under the prefix are copied.
  loadStateDict(stateDict, options) {
    const name = 'loadStateDict';
    const binding = this.checkAlive(name);
    const { options: o, inside, outside } =
      checkLoadStateDict(stateDict, options, this.#parameters);
    callCore(this.#wasm, name, (heap, result) => binding.loadStateDict([
      ...inside.map(([key, tensor]) => ({ name: key, ...heap.copyTensor(tensor) })),
      ...outside.map(([key, { shape }]) => ({ name: key, ptr: 0, shape })),
    ], o, result));
    return this.#shown();
  }

  // bytes: a .safetensors file (its bytes, a Blob, a Response or a
  // ReadableStream), or an array of them (the shards of one checkpoint);
  // options: the weight options and { onProgress, signal }. Its headers are
  // read first; then only the tensors the module uses are read into the WASM
  // heap (F32, F16 or BF16, converted once). A failed or aborted load leaves
  // the module as it was.
  loadSafetensors(bytes, options) {
    const name = 'loadSafetensors';
    this.checkAlive(name);
    const { options: o, shards, read } = checkLoadSafetensors(bytes, options);
    const reading = new CheckpointReading(name, shards, read);
    return this.#shown(runSteps(loadSteps(reading, coreLoadOf(this, o))));
  }

  static {
    // The module may be disposed during a load's waits: its binding is looked up at each step.
    coreLoadOf = (mha, options) => new CoreLoad(mha.#wasm, () => mha.checkAlive('loadSafetensors'),
      'loadSafetensors', options);
    shownLoad = (mha) => mha.#shown();
  }

  // A KVCache for this module: {batchSize, maxLength, dtype: 'float32' |
  // 'float16' | 'bfloat16', rolling} (rolling: true, a module with a finite
  // left window; { keep }, StreamingLLM, any module).
  createKVCache(options) {
    const binding = this.checkAlive('createKVCache');
    const checked = checkModuleCacheOptions(this.#config, options);
    const { batchSize, maxLength, dtype, rolling } = checked;
    return new KVCache(this.#wasm, checked, (cache, result) =>
      binding.createKVCache(cache, batchSize, maxLength, dtype, rolling === true, keepOf(rolling),
        result));
  }

  // A cache of this module from cache.save()'s bytes, continuing exactly
  // where the saved one was (docs/design.md, "Caches an app keeps: save, restore, fork, grow, stream").
  loadKVCache(bytes) {
    const binding = this.checkAlive('loadKVCache');
    const saved = checkSavedBytes(bytes);
    return new KVCache(this.#wasm, null, loadedFrom(saved, (cache, result, ptr, size) =>
      binding.loadKVCache(cache, ptr, size, result)), 'loadKVCache');
  }

  forward(query, key, value, options) {
    this.checkAlive('forward');
    const { keyPaddingMask, attnMask, positions, flags, cache } = checkForward(query, key, value,
      options, cachesOf(this.#wasm));
    // Again: a getter of an option or a tensor may have disposed the module.
    this.checkAlive('forward');
    return callFrame(this.#wasm, 'forward',
      { query, key, value, keyPaddingMask, attnMask, positions }, flags, {},
      // And again: the copy reads each tensor's getters once more.
      (frame, result) => this.checkAlive('forward').forward(frame,
        cache?.checkAlive('cache') ?? null, result));
  }

  dispose() {
    this.#life.end();
  }
}

// They return Promises in both modes (through the proxy they cannot finish
// synchronously): every error, bad input included, rejects.
returnPromises(MultiheadAttention, ['loadStateDict', 'loadSafetensors', 'forward', 'loadKVCache']);

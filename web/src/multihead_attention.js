// The JS face of mha::MultiheadAttention (see DESIGN.md, "JavaScript API").
import { FLAG, callFrame } from './call_frame.js';
import { STATUS_OK, callCore } from './core_call.js';
import { MHAError } from './errors.js';
import { KVCache, checkCache, checkCacheOptions } from './kv_cache.js';
import { settle } from './settle.js';
import {
  checkBoolean, checkKeyValue, checkMask, checkOptionalDim, checkOptionsObject,
  checkPositiveInteger, checkTensor, describe,
} from './validate.js';
import {
  checkShards, checkStateDictEntries, checkWeightOptions, copyHeader, copySources,
} from './weights.js';

const CONFIG_KEYS = ['embedDim', 'numHeads', 'bias', 'addBiasKV', 'addZeroAttn', 'kdim', 'vdim',
  'batchFirst', 'qkHeadDim', 'vHeadDim', 'dropout', 'numKVHeads', 'rotary'];
const FORWARD_KEYS = ['keyPaddingMask', 'attnMask', 'needWeights', 'averageAttnWeights',
  'isCausal', 'cache'];

// rotary: undefined, or {dim, base, interleaved} (the core checks dim).
function checkRotary(rotary) {
  if (rotary === undefined) return undefined;
  const o = checkOptionsObject(rotary, 'rotary', ['dim', 'base', 'interleaved']);
  const base = o.base ?? 10000;
  if (typeof base !== 'number' || !(base > 0 && base < Infinity)) {
    throw new MHAError(`rotary.base: expected a positive number, received ${describe(base)}`);
  }
  return {
    dim: checkOptionalDim(o.dim, 'rotary.dim'),
    base,
    interleaved: checkBoolean(o.interleaved, 'rotary.interleaved', false),
  };
}

// Frees the C++ module of a MultiheadAttention the user forgot to dispose.
const forgotten = new FinalizationRegistry((binding) => binding.delete());

// The checks below are the JS-visible ones, also run by the proxy's client so
// that bad input throws in the caller's thread.
export function checkConfig(config) {
  const name = 'createMultiheadAttention';
  if (config === undefined) {
    throw new MHAError(`${name}: expected an options object with embedDim and numHeads, ` +
                       'received undefined');
  }
  checkOptionsObject(config, name, CONFIG_KEYS);
  const dropout = config.dropout === undefined ? 0 : config.dropout;
  if (typeof dropout !== 'number' || !(dropout >= 0 && dropout <= 1)) {
    throw new MHAError(`dropout: expected a number in [0, 1], received ${describe(dropout)}`);
  }
  return {
    embed_dim: checkPositiveInteger(config.embedDim, 'embedDim'),
    num_heads: checkPositiveInteger(config.numHeads, 'numHeads'),
    bias: checkBoolean(config.bias, 'bias', true),
    add_bias_kv: checkBoolean(config.addBiasKV, 'addBiasKV', false),
    add_zero_attn: checkBoolean(config.addZeroAttn, 'addZeroAttn', false),
    kdim: checkOptionalDim(config.kdim, 'kdim'),
    vdim: checkOptionalDim(config.vdim, 'vdim'),
    batch_first: checkBoolean(config.batchFirst, 'batchFirst', false),
    qk_head_dim: checkOptionalDim(config.qkHeadDim, 'qkHeadDim'),
    v_head_dim: checkOptionalDim(config.vHeadDim, 'vHeadDim'),
    dropout,
    num_kv_heads: checkOptionalDim(config.numKVHeads, 'numKVHeads'),
    rotary: checkRotary(config.rotary),
  };
}

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
  const { inside, outside } = checkStateDictEntries(stateDict, o.prefix, shapes);
  return { options: o, inside, outside };
}

export function checkLoadSafetensors(bytes, options) {
  const name = 'loadSafetensors';
  return { options: checkWeightOptions(options, name), shards: checkShards(bytes, name) };
}

export function checkForward(query, key, value, options) {
  const o = checkOptionsObject(options, 'forward options', FORWARD_KEYS);
  checkTensor(query, 'query');
  checkKeyValue(key, value, o.cache);
  return {
    keyPaddingMask: checkMask(o.keyPaddingMask, 'keyPaddingMask'),
    attnMask: checkMask(o.attnMask, 'attnMask'),
    flags: (checkBoolean(o.needWeights, 'needWeights', true) ? FLAG.needWeights : 0) |
      (checkBoolean(o.averageAttnWeights, 'averageAttnWeights', true) ? FLAG.averageAttnWeights : 0) |
      (checkBoolean(o.isCausal, 'isCausal', false) ? FLAG.isCausal : 0),
  };
}

export class MultiheadAttention {
  // Use lib.createMultiheadAttention(config).
  constructor(wasm, config) {
    this.wasm = wasm;
    const coreOptions = checkConfig(config);
    const binding = new wasm.MultiheadAttention();
    try {
      callCore(wasm, 'createMultiheadAttention', (heap, result) =>
        binding.create(coreOptions, result));
    } catch (error) {
      binding.delete();
      throw error;
    }
    this.binding = binding;
    // [{name, shape}]: the state_dict entries this configuration has.
    this.parameters = binding.parameters();
    forgotten.register(this, binding, this);
  }

  checkAlive(what) {
    if (this.binding === null) {
      throw new MHAError(`${what}: expected a live module, received one that was disposed`);
    }
    return this.binding;
  }

  // state_dict: {name: Float32Array | {data, shape}}; the module under
  // options.prefix in any layout (DESIGN.md, "Weights from the modules people
  // have"): detected, or forced with options.layout / options.names. A bare
  // Float32Array has its parameter's shape for nn.MultiheadAttention's names
  // (in_proj_weight and q/k/v_proj_weight may stand for each other when
  // kdim == vdim == embedDim: give those as {data, shape}), else 1-D. Only
  // the entries under the prefix are copied. A Promise, as through the proxy;
  // bad input that JS sees throws.
  loadStateDict(stateDict, options) {
    const name = 'loadStateDict';
    const binding = this.checkAlive(name);
    const { options: o, inside, outside } = checkLoadStateDict(stateDict, options, this.parameters);
    return settle(() => {
      callCore(this.wasm, name, (heap, result) => binding.loadStateDict([
        ...inside.map(([key, tensor]) => ({ name: key, ...heap.copyTensor(tensor) })),
        ...outside.map(([key, { shape }]) => ({ name: key, ptr: 0, shape })),
      ], o, result));
    });
  }

  // bytes: a .safetensors file, or an array of them (the shards of one
  // checkpoint). Its headers are read first; then only the tensors the module
  // uses are copied into the WASM heap (F32, F16 or BF16, converted once).
  loadSafetensors(bytes, options) {
    const name = 'loadSafetensors';
    const binding = this.checkAlive(name);
    const { options: o, shards } = checkLoadSafetensors(bytes, options);
    return settle(() => {
      callCore(this.wasm, name, (heap, result) => {
        const headers = shards.map((shard) => copyHeader(heap, shard));
        const code = binding.weightSources(headers, o, result);
        if (code !== STATUS_OK) return code;
        const tensors = copySources(heap, shards, result.value());
        return binding.loadSafetensors(headers, o, tensors, result);
      });
    });
  }

  // A KVCache for this module: {batchSize, maxLength, dtype: 'float32' | 'float16'}.
  createKVCache(options) {
    const binding = this.checkAlive('createKVCache');
    const { batchSize, maxLength, dtype } = checkCacheOptions(options, 'createKVCache');
    return new KVCache(this.wasm, (cache, result) =>
      binding.createKVCache(cache, batchSize, maxLength, dtype, result));
  }

  async forward(query, key, value, options) {
    this.checkAlive('forward');
    const { keyPaddingMask, attnMask, flags } = checkForward(query, key, value, options);
    const cache = checkCache(options?.cache, this.wasm);
    return callFrame(this.wasm, 'forward',
      [query, key ?? undefined, value ?? undefined, keyPaddingMask, attnMask], flags, 0,
      // Checked again: a getter (of an option or a tensor) may have disposed
      // the module or the cache meanwhile.
      (frame, result) => this.checkAlive('forward').forward(frame,
        cache?.checkAlive('cache') ?? null, result));
  }

  dispose() {
    if (this.binding === null) return;
    forgotten.unregister(this);
    this.binding.delete();
    this.binding = null;
  }
}

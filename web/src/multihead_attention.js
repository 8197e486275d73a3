// The JS face of mha::MultiheadAttention (see DESIGN.md, "JavaScript API").
import { callCore } from './core_call.js';
import { MHAError } from './errors.js';
import { settle } from './settle.js';
import {
  checkBoolean, checkBytes, checkMask, checkOptionalDim, checkOptionsObject, checkParameter,
  checkPositiveInteger, checkTensor, describe,
} from './validate.js';

const CONFIG_KEYS = ['embedDim', 'numHeads', 'bias', 'addBiasKV', 'addZeroAttn', 'kdim', 'vdim',
  'batchFirst', 'qkHeadDim', 'vHeadDim', 'dropout'];
const FORWARD_KEYS = ['keyPaddingMask', 'attnMask', 'needWeights', 'averageAttnWeights',
  'isCausal'];

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
  };
}

function checkPrefix(options, name) {
  const { prefix = '' } = checkOptionsObject(options, name, ['prefix']);
  if (typeof prefix !== 'string') {
    throw new MHAError(`${name}: prefix: expected a string, received ${describe(prefix)}`);
  }
  return prefix;
}

// { prefix, entries: [[name, tensor]] }; `parameters`: the module's.
export function checkLoadStateDict(stateDict, options, parameters) {
  const name = 'loadStateDict';
  const prefix = checkPrefix(options, name);
  if (stateDict === null || typeof stateDict !== 'object' || ArrayBuffer.isView(stateDict)) {
    throw new MHAError(`${name}: expected an object {name: tensor}, received ` +
                       describe(stateDict));
  }
  const shapes = new Map(parameters.map((p) => [prefix + p.name, p.shape]));
  const entries = Object.keys(stateDict).filter((key) => key.startsWith(prefix))
    .map((key) => [key, checkParameter(stateDict[key], key, shapes.get(key))]);
  return { prefix, entries };
}

export function checkLoadSafetensors(bytes, options) {
  return { prefix: checkPrefix(options, 'loadSafetensors'), data: checkBytes(bytes, 'bytes') };
}

export function checkForward(query, key, value, options) {
  const o = checkOptionsObject(options, 'forward options', FORWARD_KEYS);
  checkTensor(query, 'query');
  checkTensor(key, 'key');
  checkTensor(value, 'value');
  return {
    keyPaddingMask: checkMask(o.keyPaddingMask, 'keyPaddingMask'),
    attnMask: checkMask(o.attnMask, 'attnMask'),
    flags: {
      need_weights: checkBoolean(o.needWeights, 'needWeights', true),
      average_attn_weights: checkBoolean(o.averageAttnWeights, 'averageAttnWeights', true),
      is_causal: checkBoolean(o.isCausal, 'isCausal', false),
    },
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

  // state_dict: {name: Float32Array | {data, shape}} with PyTorch names (with
  // `prefix` prepended): all of `parameters`, where in_proj_weight and
  // q/k/v_proj_weight may stand for each other when kdim == vdim == embedDim
  // (give those as {data, shape}). Keys without the prefix are ignored. The
  // core checks names, shapes and that nothing is missing. A Promise, as
  // through the proxy; bad input that JS sees throws.
  loadStateDict(stateDict, options) {
    const name = 'loadStateDict';
    const binding = this.checkAlive(name);
    const { prefix, entries } = checkLoadStateDict(stateDict, options, this.parameters);
    return settle(() => {
      callCore(this.wasm, name, (heap, result) => binding.loadStateDict(
        entries.map(([key, tensor]) => ({ name: key, ...heap.copyTensor(tensor) })), prefix, result));
    });
  }

  // bytes: the contents of a .safetensors file (F32, F16 or BF16 tensors).
  loadSafetensors(bytes, options) {
    const name = 'loadSafetensors';
    const binding = this.checkAlive(name);
    const { prefix, data } = checkLoadSafetensors(bytes, options);
    return settle(() => {
      callCore(this.wasm, name, (heap, result) =>
        binding.loadSafetensors(heap.copyIn(data), data.byteLength, prefix, result));
    });
  }

  async forward(query, key, value, options) {
    this.checkAlive('forward');
    const { keyPaddingMask, attnMask, flags } = checkForward(query, key, value, options);
    // Again: an option getter may have disposed the module meanwhile.
    const binding = this.checkAlive('forward');
    return callCore(this.wasm, 'forward', (heap, result) => {
      return binding.forward(heap.copyTensor(query), heap.copyTensor(key),
        heap.copyTensor(value), {
          ...flags,
          key_padding_mask: heap.copyTensor(keyPaddingMask),
          attn_mask: heap.copyTensor(attnMask),
        }, result);
    });
  }

  dispose() {
    if (this.binding === null) return;
    forgotten.unregister(this);
    this.binding.delete();
    this.binding = null;
  }
}

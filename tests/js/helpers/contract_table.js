// The contract table (docs/design.md, "Loading in real apps"): for each method and
// each kind of bad input, whether the call throws synchronously, returns,
// rejects or resolves, and with what. Run in the calling thread in Node
// (tests/js/contract.test.js), in a worker_threads worker, and through the
// proxy in Chromium (tests/e2e/contract.test.mjs): the outcomes must be the
// same row by row. No Node modules here.
import { moduleConfig } from './fixture_data.js';

export const CONTRACT_FIXTURE = 'e16_h2_l7_bool_kpm.safetensors';

// A value as the modes can compare it: arrays' contents by type and length,
// objects made by the library (modules, caches) as 'an object'.
function summary(value) {
  if (ArrayBuffer.isView(value)) return `${value.constructor.name}(${value.length})`;
  if (Array.isArray(value)) return value.map(summary);
  if (value === null || typeof value !== 'object') return value;
  if (Object.getPrototypeOf(value) !== Object.prototype) return 'an object';
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, summary(v)]));
}

// What `call` does, told apart: a synchronous throw is not a rejection.
export async function outcomeOf(call, MHAError) {
  const failure = (kind, error) => ({
    kind, mhaError: error instanceof MHAError, message: String(error?.message ?? error),
  });
  let returned;
  try {
    returned = call();
  } catch (error) {
    return failure('throws', error);
  }
  if (!(returned instanceof Promise)) return { kind: 'returns', value: summary(returned) };
  return returned.then((value) => ({ kind: 'resolves', value: summary(value) }),
    (error) => failure('rejects', error));
}

// fixture: CONTRACT_FIXTURE loaded. A method that returns a Promise never
// throws: its errors, bad arguments included, reject; creates and getters
// throw. Rows: [what, (ctx) => the call's result,
// expected: { throws | rejects: pattern of the MHAError's message } or
// { returns | resolves: true }]. A row runs synchronously up to its call:
// what it sets up is not awaited (as an app that does not await).
export function contractTable(fixture) {
  const tensor = (name) => {
    const t = fixture.tensors[name];
    return { data: t.data, shape: t.shape };
  };
  const [query, key, value] = ['query', 'key', 'value'].map((n) => tensor(`input.${n}`));
  const config = moduleConfig(fixture.config);
  const params = Object.fromEntries(Object.keys(fixture.tensors)
    .filter((name) => name.startsWith('param.'))
    .map((name) => [name.slice('param.'.length), fixture.tensors[name].data]));
  const zeros = (shape) => ({ data: new Float32Array(shape.reduce((a, b) => a * b, 1)), shape });
  const q4 = zeros([2, 4, 3, 8]);
  const k4 = zeros([2, 4, 5, 8]);
  const sdpaCache = { batchSize: 2, numKVHeads: 4, headDim: 8, maxLength: 8 };
  // A tensor as onnxruntime-web's Tensor is one: `dims`, `data` a getter of its class.
  class DimsTensor {
    constructor({ data, shape }) {
      Object.assign(this, { cpuData: data, dataLocation: 'cpu', type: 'float32', dims: shape, size: data.length });
    }

    get data() { return this.cpuData; }
  }
  const dims = (t) => new DimsTensor(t);
  const kpm = tensor('input.key_padding_mask');

  // Objects a row makes, disposed after the table.
  const made = (ctx, object) => {
    ctx.made.push(object);
    return object;
  };
  const create = (ctx, c = config) => made(ctx, ctx.lib.createMultiheadAttention(c));
  const cacheOf = (ctx, mha = ctx.mha) => made(ctx, mha.createKVCache({ batchSize: 2, maxLength: 16 }));
  const disposed = (object) => {
    object.dispose();
    return object;
  };
  const createWith = (extra) => (ctx) => create(ctx, { embedDim: 8, numHeads: 2, ...extra });
  const forwardInto = (ctx, cache) => ctx.mha.forward(query, key, value, { cache, needWeights: false });
  // One more step on caches a and b; throws unless their outputs have the same bits.
  const sameStep = async (ctx, a, b) => {
    const row = { data: query.data.subarray(0, 32), shape: [1, 2, 16] };
    const [x, y] = await Promise.all([a, b].map((cache) =>
      ctx.mha.forward(row, row, row, { cache, needWeights: false })));
    const bits = (t) => new Uint32Array(t.output.data.buffer, t.output.data.byteOffset, t.output.data.length);
    if (!bits(x).every((v, i) => v === bits(y)[i])) throw new Error('the two caches gave other bits');
  };

  // [before, during, after] a load's memory; throws unless it shows once the load has settled.
  const memoryAround = (mha, load) => {
    const before = mha.memory;
    const loading = load(mha);
    const during = mha.memory;
    return loading.then(() => {
      if (during !== before || !(mha.memory > before)) {
        throw new Error(`memory ${before}, ${during} while loading, ${mha.memory} once loaded`);
      }
      return [before, during, mha.memory];
    });
  };

  const THROWS = (pattern) => ({ throws: pattern });
  const REJECTS = (pattern) => ({ rejects: pattern });
  const RETURNS = { returns: true };
  const RESOLVES = { resolves: true };

  const rows = [
    // createMultiheadAttention: every config the core refuses throws here.
    ['create: embedDim a string', createWith({ embedDim: '8' }),
      THROWS(/^embedDim: expected a positive integer, received the string '8'$/)],
    ['create: unknown option', createWith({ num_heads: 2 }),
      THROWS(/createMultiheadAttention: unknown option 'num_heads'/)],
    ['create fails: heads not dividing embedDim', createWith({ embedDim: 10, numHeads: 3 }),
      THROWS(/^createMultiheadAttention: num_heads: embed_dim \(10\) must be divisible by num_heads \(3\)$/)],
    ['create fails: numKVHeads not dividing numHeads', createWith({ numHeads: 4, numKVHeads: 3 }),
      THROWS(/^createMultiheadAttention: num_kv_heads: expected a divisor of num_heads \(4\)/)],
    ['create fails: rotary.dim odd', createWith({ rotary: { dim: 3 } }),
      THROWS(/^createMultiheadAttention: rotary\.dim: expected an even number of features <= qk_head_dim \(4\), got 3$/)],
    ['create fails: rotary.dim above qkHeadDim', createWith({ rotary: { dim: 6 } }),
      THROWS(/rotary\.dim: .*qk_head_dim \(4\), got 6$/)],
    ['create fails: rotary.base Infinity', createWith({ rotary: { base: Infinity } }),
      THROWS(/^createMultiheadAttention: rotary\.base: expected a positive finite number, received number Infinity$/)],
    ['create fails: rotary.base 0', createWith({ rotary: { base: 0 } }), THROWS(/rotary\.base: expected a positive finite number/)],
    ['create: rotary.base 1e301 (finite)', createWith({ rotary: { base: 1e301 } }), RETURNS],
    // rotary scaling (docs/design.md, "The attention of today's models", step 3)
    ['create: rotary.scaling llama3 (Llama 3.1)', createWith({ rotary: { base: 500000, scaling: {
      rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4,
      original_max_position_embeddings: 8192 } } }), RETURNS],
    ['create: rotary.scaling null (config.json without one)', createWith({ rotary: { scaling: null } }), RETURNS],
    ['create fails: rotary.scaling dynamic', createWith({ rotary: { scaling: { rope_type: 'dynamic', factor: 2 } } }),
      THROWS(/^createMultiheadAttention: rotary\.scaling: rope_type 'dynamic' is not supported \(expected default, linear, llama3 or yarn; any other table: rotary\.inv_freq and rotary\.attention_factor, as transformers computes them\)$/)],
    ['create fails: rotary.scaling longrope (type)', createWith({ rotary: { scaling: { type: 'longrope', factor: 2 } } }),
      THROWS(/rotary\.scaling: rope_type 'longrope' is not supported/)],
    // config.json's values as they are: sliding_window null (Mistral v0.2+, Qwen3) is no window
    ['create: window null', createWith({ window: null, rotary: { scaling: null } }), RETURNS],
    ['create: alibi false (Falcon-7B)', createWith({ alibi: false, addBiasKV: true }), RETURNS],
    // Phi-3-mini-128k's rope_scaling as its config.json has it: the kind is named, not its keys
    ['create fails: rotary.scaling longrope with its factors', createWith({ rotary: { scaling: {
      type: 'longrope', short_factor: [1, 1], long_factor: [2, 2] } } }),
      THROWS(/^createMultiheadAttention: rotary\.scaling: rope_type 'longrope' is not supported \(expected default, linear, llama3 or yarn; any other table: rotary\.inv_freq/)],
    ['create fails: rotary.scaling without rope_type', createWith({ rotary: { scaling: { factor: 2 } } }),
      THROWS(/^rotary\.scaling: expected rope_type \(or type\) naming the kind, received undefined and undefined$/)],
    ['create fails: rotary.scaling key unknown', createWith({ rotary: { scaling: { rope_type: 'linear', factor: 2, rope_theta: 1e6 } } }),
      THROWS(/^rotary\.scaling: unknown option 'rope_theta'/)],
    ['create fails: yarn without factor', createWith({ rotary: { scaling: { rope_type: 'yarn', original_max_position_embeddings: 4096 } } }),
      THROWS(/^createMultiheadAttention: rotary\.scaling\.factor: required by rope_type 'yarn'$/)],
    ['create fails: llama3 without original_max_position_embeddings', createWith({ rotary: { scaling: {
      rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4 } } }),
      THROWS(/^createMultiheadAttention: rotary\.scaling\.original_max_position_embeddings: required by rope_type 'llama3'$/)],
    ['create fails: linear factor NaN', createWith({ rotary: { scaling: { type: 'linear', factor: NaN } } }),
      THROWS(/^createMultiheadAttention: rotary\.scaling\.factor: expected a positive finite number, received number NaN$/)],
    ['create fails: yarn mscale Infinity', createWith({ rotary: { scaling: { rope_type: 'yarn', factor: 4,
      original_max_position_embeddings: 64, mscale: Infinity } } }),
      THROWS(/^createMultiheadAttention: rotary\.scaling\.mscale: expected a finite number, received number Infinity$/)],
    ['create fails: rotary.scaling.factor a string', createWith({ rotary: { scaling: { type: 'linear', factor: '2' } } }),
      THROWS(/^rotary\.scaling\.factor: expected a number, received the string '2'$/)],
    ['create: rotary.invFreq (dim from its length) and attentionFactor', createWith({ rotary: {
      invFreq: new Float32Array([1, 0.5]), attentionFactor: 1.2 } }), RETURNS],
    ['create fails: rotary.invFreq with base', createWith({ rotary: { base: 10000, invFreq: new Float32Array([1, 0.5]) } }),
      THROWS(/^createMultiheadAttention: rotary\.inv_freq: cannot be combined with rotary\.base$/)],
    ['create fails: rotary.invFreq with scaling', createWith({ rotary: { invFreq: new Float32Array([1, 0.5]),
      scaling: { type: 'linear', factor: 2 } } }),
      THROWS(/^createMultiheadAttention: rotary\.inv_freq: cannot be combined with rotary\.scaling$/)],
    ['create fails: rotary.invFreq not dim / 2 long', createWith({ rotary: { dim: 4, invFreq: new Float32Array([1]) } }),
      THROWS(/^createMultiheadAttention: rotary\.inv_freq: expected dim \/ 2 \(2\) finite entries, got 1$/)],
    ['create fails: rotary.invFreq with NaN', createWith({ rotary: { invFreq: new Float32Array([1, NaN]) } }),
      THROWS(/rotary\.inv_freq: expected dim \/ 2 \(2\) finite entries, got 2$/)],
    ['create fails: rotary.invFreq an Array', createWith({ rotary: { invFreq: [1, 0.5] } }),
      THROWS(/^rotary\.invFreq: expected a non-empty Float32Array of dim \/ 2 inverse frequencies, received an Array of length 2$/)],
    ['create fails: rotary.attentionFactor with scaling', createWith({ rotary: { attentionFactor: 2,
      scaling: { rope_type: 'yarn', factor: 4, original_max_position_embeddings: 64 } } }),
      THROWS(/^createMultiheadAttention: rotary\.attention_factor: cannot be combined with rotary\.scaling/)],
    ['create fails: rotary.attentionFactor Infinity', createWith({ rotary: { attentionFactor: Infinity } }),
      THROWS(/^createMultiheadAttention: rotary\.attention_factor: expected a positive finite number, received number Infinity$/)],
    ['create fails: dropout 1', createWith({ dropout: 1 }),
      THROWS(/^createMultiheadAttention: dropout: expected a probability in \[0, 1\), received number 1$/)],
    ['create fails: dropout 1 - 1e-12 (1 as a float)', createWith({ dropout: 1 - 1e-12 }), THROWS(/dropout: expected a probability in \[0, 1\)/)],
    ['create fails: a dim above 2^24', createWith({ kdim: 2 ** 24 + 1 }),
      THROWS(/^createMultiheadAttention: config: dims above 2\^24 are not supported$/)],
    ['create fails: qkNorm.type unknown', createWith({ qkNorm: { type: 'l2' } }),
      THROWS(/^qkNorm\.type: expected 'rms' or 'layer', received the string 'l2'$/)],
    ['create fails: qkNorm.eps 0', createWith({ qkNorm: { eps: 0 } }),
      THROWS(/^createMultiheadAttention: qk_norm\.eps: expected a positive finite number, received number 0$/)],
    ['parameters with qkNorm over all', (ctx) =>
      create(ctx, { embedDim: 8, numHeads: 4, numKVHeads: 2, qkNorm: { over: 'all' } }).parameters, RETURNS],
    ['parameters right after create', (ctx) => create(ctx).parameters, RETURNS],
    ['parameters with numKVHeads and qkHeadDim', (ctx) =>
      create(ctx, { embedDim: 8, numHeads: 4, numKVHeads: 2, qkHeadDim: 3, addBiasKV: true }).parameters, RETURNS],
    ['parameters of a disposed module', (ctx) => disposed(create(ctx)).parameters,
      THROWS(/^mha\.parameters: expected a live module, received one that was disposed$/)],

    // loadStateDict / loadSafetensors, before any call on the module: every error rejects.
    ['load before any call', (ctx) => create(ctx).loadStateDict(params), RESOLVES],
    // mha.memory shows a load once its Promise settles, in both modes: [before, during, after].
    ['mha.memory during and after a loadStateDict', (ctx) => memoryAround(create(ctx),
      (mha) => mha.loadStateDict(params)), RESOLVES],
    ['mha.memory during and after a loadSafetensors from bytes', (ctx) => memoryAround(create(ctx),
      (mha) => mha.loadSafetensors(fixture.bytes, { prefix: 'param.' })), RESOLVES],
    ['loadStateDict: {data, dims} entries', (ctx) => create(ctx).loadStateDict(Object.fromEntries(
      Object.entries(params).map(([name, data]) => [name, { data, dims: [data.length] }]))),
    REJECTS(/^loadStateDict: .*in_proj_weight/)],
    ['loadStateDict: {data, dims} entries of their shapes', (ctx) => {
      const mha = create(ctx);
      return mha.loadStateDict(Object.fromEntries(mha.parameters.map(({ name, shape }) =>
        [name, dims({ data: params[name], shape })])));
    }, RESOLVES],
    ['load before any call: a bare array of the wrong length', (ctx) =>
      create(ctx).loadStateDict({ ...params, 'out_proj.bias': new Float32Array(15) }),
    REJECTS(/^loadStateDict: out_proj\.bias: expected 16 elements for shape \(16\), received 15$/)],
    ['loadStateDict: an entry that is not a tensor', (ctx) =>
      create(ctx).loadStateDict({ ...params, in_proj_bias: 'zeros' }),
    REJECTS(/^loadStateDict: in_proj_bias: expected a Float32Array or a tensor \{data, shape\} of shape \(48\), received the string 'zeros'$/)],
    ['loadStateDict: a tensor entry with Float64Array data', (ctx) =>
      create(ctx).loadStateDict({ ...params, 'out_proj.bias': { data: new Float64Array(16), shape: [16] } }),
    REJECTS(/^loadStateDict: out_proj\.bias\.data: expected a Float32Array, received a Float64Array of length 16$/)],
    ['loadStateDict: not an object', (ctx) => create(ctx).loadStateDict('weights'),
      REJECTS(/loadStateDict: expected an object \{name: tensor\}, received the string 'weights'/)],
    ['loadStateDict: a parameter missing', (ctx) => {
      const { 'out_proj.bias': _, ...rest } = params;
      return create(ctx).loadStateDict(rest);
    }, REJECTS(/loadStateDict: .*missing parameters: out_proj\.bias/)],
    ['loadStateDict: an unexpected bare array', (ctx) =>
      create(ctx).loadStateDict({ ...params, bias_k: new Float32Array(16) }),
    REJECTS(/unexpected parameter 'bias_k' for this configuration/)],
    // A parameter of an option in the checkpoint without the option, or missing with it
    // (docs/design.md, "The attention of today's models"): both sides named.
    ['loadStateDict: q_norm.weight without qkNorm', (ctx) =>
      create(ctx).loadStateDict({ ...params, 'q_norm.weight': new Float32Array(8) }),
    REJECTS(/q_norm\.weight: in the checkpoint, but the module was created without qk_norm$/)],
    ['loadStateDict: qkNorm without q_norm.weight', (ctx) =>
      create(ctx, { ...config, qkNorm: {} }).loadStateDict(params),
    REJECTS(/q_norm\.weight: not in the checkpoint, and the module was created with qk_norm rms over 'head'$/)],
    ['loadStateDict: q_norm.weight per head for qkNorm over all', (ctx) =>
      create(ctx, { ...config, qkNorm: { over: 'all' } }).loadStateDict({ ...params,
        'q_norm.weight': zeros([2, 8]), 'k_norm.weight': new Float32Array(16) }),
    REJECTS(/q_norm\.weight: expected shape \(16,\) for this module \(qk_norm rms over 'all'; .*\), received \(2, 8\)$/)],
    ['loadStateDict: q_norm.bias for an RMSNorm', (ctx) =>
      create(ctx, { ...config, qkNorm: {} }).loadStateDict({ ...params, 'q_norm.weight': new Float32Array(8),
        'k_norm.weight': new Float32Array(8), 'q_norm.bias': new Float32Array(8) }),
    REJECTS(/q_norm\.bias: in the checkpoint, but the module's qk_norm rms over 'head' has no bias/)],
    ['loadStateDict: q_norm per head', (ctx) =>
      create(ctx, { ...config, qkNorm: { type: 'layer' } }).loadStateDict({ ...params,
        'q_norm.weight': zeros([2, 8]), 'k_norm.weight': zeros([2, 8]), 'k_norm.bias': zeros([8]) }),
    RESOLVES],
    ['loadStateDict: sinks without sinks: true', (ctx) =>
      create(ctx).loadStateDict({ ...params, sinks: new Float32Array(2) }),
    REJECTS(/sinks: in the checkpoint, but the module was created without sinks$/)],
    ['loadStateDict: sinks: true without sinks', (ctx) =>
      create(ctx, { ...config, sinks: true }).loadStateDict(params),
    REJECTS(/sinks: not in the checkpoint, and the module was created with sinks$/)],
    ['loadSafetensors: a string', (ctx) => create(ctx).loadSafetensors('model.safetensors'),
      REJECTS(/loadSafetensors: bytes: expected a Uint8Array, an ArrayBuffer, a Blob, a Response or a ReadableStream/)],
    ['loadSafetensors: an unknown layout', (ctx) => create(ctx).loadSafetensors(fixture.bytes, { layout: 'keras' }),
      REJECTS(/loadSafetensors: layout: expected one of/)],
    ['loadSafetensors: bytes that are not a safetensors file', (ctx) => create(ctx).loadSafetensors(new Uint8Array(20)),
      REJECTS(/^loadSafetensors: /)],
    ['loadSafetensors', (ctx) => create(ctx).loadSafetensors(fixture.bytes, { prefix: 'param.' }), RESOLVES],
    ['loadSafetensors on a disposed module', (ctx) => disposed(create(ctx)).loadSafetensors(fixture.bytes),
      REJECTS(/^loadSafetensors: expected a live module, received one that was disposed$/)],
    ['loadStateDict on a disposed module', (ctx) => disposed(create(ctx)).loadStateDict(params),
      REJECTS(/^loadStateDict: expected a live module, received one that was disposed$/)],

    // forward: every error rejects, JS-visible or the core's.
    ['forward', ({ mha }) => mha.forward(query, key, value), RESOLVES],
    ['forward: {data, dims} tensors and mask (onnxruntime-web, transformers.js)', ({ mha }) =>
      mha.forward(dims(query), dims(key), { data: value.data, dims: value.shape },
        { keyPaddingMask: { data: kpm.data, dims: kpm.shape } }), RESOLVES],
    ['forward: query.dims not an array', ({ mha }) => mha.forward({ data: query.data, dims: 224 }, key, value),
      REJECTS(/^query\.dims: expected a non-empty array of positive integers, received number 224$/)],
    ['forward: query dims of another size', ({ mha }) => mha.forward(dims({ data: query.data, shape: [7, 16] }), key, value),
      REJECTS(/^query: expected 112 elements for shape \(7, 16\), received 224$/)],
    ['forward: query a bare Float32Array', ({ mha }) => mha.forward(query.data, key, value),
      REJECTS(/^query: expected a tensor \{data, shape\} or \{data, dims\}, received a Float32Array of length 224$/)],
    ['forward: query data of the wrong length', ({ mha }) => mha.forward({ data: new Float32Array(3), shape: query.shape }, key, value),
      REJECTS(/^query: expected 224 elements for shape \(7, 2, 16\), received 3$/)],
    ['forward: a misspelt option', ({ mha }) => mha.forward(query, key, value, { needweights: false }),
      REJECTS(/forward options: unknown option 'needweights'/)],
    ['forward: isCausal a number', ({ mha }) => mha.forward(query, key, value, { isCausal: 1 }),
      REJECTS(/^isCausal: expected true or false, received number 1$/)],
    ['forward: cache not a KVCache', ({ mha }) => mha.forward(query, key, value, { cache: {} }),
      REJECTS(/^cache: expected a KVCache from createKVCache of this library, received an object with keys \{\}$/)],
    ['forward: a disposed cache', (ctx) => forwardInto(ctx, disposed(cacheOf(ctx))),
      REJECTS(/^cache: expected a live KVCache, received one that was disposed$/)],
    ['forward: key and value null without a cache', ({ mha }) => mha.forward(query, null, null),
      REJECTS(/^key, value: both null attends the keys of a cache only, and there is no cache: expected options\.cache, or two tensors$/)],
    ['forward: key null, value a tensor, with a cache', (ctx) =>
      ctx.mha.forward(query, null, value, { cache: cacheOf(ctx) }), REJECTS(/^key, value: expected two tensors or both null/)],
    ['forward: value length differs from key length', ({ mha }) => mha.forward(query, key, zeros([6, 2, 16])),
      REJECTS(/value: expected shape \(7, 2, 16\).*got \(6, 2, 16\)/)],
    ['forward before the parameters are loaded', (ctx) => create(ctx).forward(query, key, value),
      REJECTS(/^forward: parameters not loaded: in_proj_weight/)],
    ['forward on a disposed module', (ctx) => disposed(create(ctx)).forward(query, key, value),
      REJECTS(/^forward: expected a live module, received one that was disposed$/)],
    ['forward: an option getter that disposes the module', (ctx) => {
      const mha = create(ctx);
      return mha.forward(query, key, value, { get needWeights() { mha.dispose(); return true; } });
    }, REJECTS(/^forward: expected a live module, received one that was disposed$/)],
    ['forward: more keys than the cache holds', (ctx) =>
      ctx.mha.forward(query, key, value, { cache: made(ctx, ctx.mha.createKVCache({ batchSize: 2, maxLength: 4 })) }),
    REJECTS(/cache: appending 7 keys to a cache holding 0 would exceed its max_length 4/)],

    // Caches: made at once, their getters known at once.
    ['mha.createKVCache: getters right after', (ctx) => {
      const cache = made(ctx, ctx.mha.createKVCache({ batchSize: 2, maxLength: 5, dtype: 'bfloat16' }));
      return [cache.length, cache.maxLength, cache.batchSize, cache.dtype, cache.bytes];
    }, RETURNS],
    ['mha.createKVCache: dtype float64', ({ mha }) => mha.createKVCache({ batchSize: 1, maxLength: 4, dtype: 'float64' }),
      THROWS(/^dtype: expected 'float32', 'float16' or 'bfloat16', received the string 'float64'$/)],
    ['mha.createKVCache: maxLength 0', ({ mha }) => mha.createKVCache({ batchSize: 1, maxLength: 0 }),
      THROWS(/^maxLength: expected a positive integer, received number 0$/)],
    ['mha.createKVCache on a module with addBiasKV', (ctx) =>
      create(ctx, { embedDim: 8, numHeads: 2, addBiasKV: true }).createKVCache({ batchSize: 1, maxLength: 4 }),
    THROWS(/^createKVCache: cache: a module with add_bias_kv or add_zero_attn cannot decode with a cache$/)],
    ['mha.createKVCache beyond the address space', ({ mha }) => mha.createKVCache({ batchSize: 2 ** 20, maxLength: 2 ** 20 }),
      THROWS(/^createKVCache: cache: out of memory for batch_size 1048576 and max_length 1048576: its storage would exceed the address space$/)],
    ['mha.createKVCache on a disposed module', (ctx) => disposed(create(ctx)).createKVCache({ batchSize: 1, maxLength: 4 }),
      THROWS(/^createKVCache: expected a live module, received one that was disposed$/)],
    ['lib.createKVCache: getters right after', (ctx) => {
      const cache = made(ctx, ctx.lib.createKVCache({ ...sdpaCache, dtype: 'float16', vHeadDim: 3 }));
      return [cache.length, cache.maxLength, cache.batchSize, cache.dtype, cache.bytes];
    }, RETURNS],
    ['lib.createKVCache: numKVHeads missing', ({ lib }) => lib.createKVCache({ batchSize: 1, maxLength: 4, headDim: 4 }),
      THROWS(/^numKVHeads: expected a positive integer, received undefined$/)],
    ['lib.createKVCache beyond the address space', ({ lib }) =>
      lib.createKVCache({ ...sdpaCache, maxLength: 2 ** 41 }), THROWS(/^createKVCache: cache: out of memory for batch_size 2 and max_length 2199023255552/)],
    ['cache getters of a disposed cache', (ctx) => disposed(cacheOf(ctx)).maxLength,
      THROWS(/^cache\.maxLength: expected a live KVCache, received one that was disposed$/)],

    // truncate, reset, reorder: their arguments' types and what the core checks (n beyond what
    // the cache holds, an index out of range) reject alike.
    ['truncate after an unawaited forward', (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      return cache.truncate(3);
    }, RESOLVES],
    ['truncate beyond the keys of an unawaited forward', (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      return cache.truncate(8);
    }, REJECTS(/^truncate: expected a length in \[0, 7\] \(the keys the cache holds\), got 8$/)],
    ['truncate beyond an empty cache', (ctx) => cacheOf(ctx).truncate(1), REJECTS(/^truncate: expected a length in \[0, 0\]/)],
    ['truncate(-1)', (ctx) => cacheOf(ctx).truncate(-1), REJECTS(/^truncate: expected a length \(an integer >= 0\), received number -1$/)],
    ['truncate(1.5)', (ctx) => cacheOf(ctx).truncate(1.5), REJECTS(/^truncate: expected a length .*received number 1\.5$/)],
    ["truncate('1')", (ctx) => cacheOf(ctx).truncate('1'), REJECTS(/^truncate: expected a length .*received the string '1'$/)],
    ['reset', (ctx) => cacheOf(ctx).reset(), RESOLVES],
    ['reset on a disposed cache', (ctx) => disposed(cacheOf(ctx)).reset(),
      REJECTS(/^reset: expected a live KVCache, received one that was disposed$/)],
    ['reorder', (ctx) => cacheOf(ctx).reorder(new Int32Array([1, 0])), RESOLVES],
    ['reorder: an Array', (ctx) => cacheOf(ctx).reorder([1, 0]),
      REJECTS(/^reorder: indices: expected an Int32Array of batchSize \(2\) entries, received an Array of length 2$/)],
    ['reorder: one index for two entries', (ctx) => cacheOf(ctx).reorder(new Int32Array([0])),
      REJECTS(/^reorder: indices: expected batchSize \(2\) entries, received 1$/)],
    ['reorder: an index out of range', (ctx) => cacheOf(ctx).reorder(new Int32Array([0, 2])),
      REJECTS(/^reorder: indices\[1\]: expected an index in \[0, 2\) \(the cache's batch_size\), got 2/)],
    ['reorder on a disposed cache', (ctx) => disposed(cacheOf(ctx)).reorder(new Int32Array([1, 0])),
      REJECTS(/^reorder: expected a live KVCache, received one that was disposed$/)],
    ['truncate on a disposed cache', (ctx) => disposed(cacheOf(ctx)).truncate(0),
      REJECTS(/^truncate: expected a live KVCache, received one that was disposed$/)],

    // save, loadKVCache, select, clone, resize (docs/design.md, "Caches an app keeps: save,
    // restore, fork, grow, stream"): the bytes cross to the worker and back; what is made
    // continues bit for bit.
    ['save after an unawaited forward, mha.loadKVCache, a step on each: the same bits', async (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      const bytes = await cache.save();
      const loaded = made(ctx, await ctx.mha.loadKVCache(bytes));
      await sameStep(ctx, cache, loaded);
      return [bytes, loaded.length, loaded.held, loaded.maxLength, loaded.batchSize, loaded.dtype,
        loaded.rolling, loaded.bytes];
    }, RESOLVES],
    ['lib.loadKVCache of a functional cache, from its ArrayBuffer', async (ctx) => {
      const cache = made(ctx, ctx.lib.createKVCache({ ...sdpaCache, dtype: 'bfloat16' }));
      ctx.lib.scaledDotProductAttention(q4, k4, k4, { cache });
      const loaded = made(ctx, await ctx.lib.loadKVCache((await cache.save()).buffer));
      return [loaded.length, loaded.maxLength, loaded.dtype, loaded.bytes];
    }, RESOLVES],
    ['mha.loadKVCache: a functional cache of other heads', async (ctx) =>
      ctx.mha.loadKVCache(await made(ctx, ctx.lib.createKVCache(sdpaCache)).save()),
    REJECTS(/^loadKVCache: bytes: the saved cache's heads differ from this module's caches: num_kv_heads 4 \(this module's: 2\); nothing was loaded$/)],
    ['mha.loadKVCache: a string', ({ mha }) => mha.loadKVCache('cache'),
      REJECTS(/^loadKVCache: bytes: expected a Uint8Array \(or ArrayBuffer\) from cache\.save\(\), received the string 'cache'$/)],
    ['mha.loadKVCache: truncated bytes', async (ctx) => {
      const bytes = await cacheOf(ctx).save();
      return ctx.mha.loadKVCache(bytes.subarray(0, 40));
    }, REJECTS(/^loadKVCache: bytes: expected a saved KVCache \(at least 96 bytes\), got 40 bytes/)],
    ['mha.loadKVCache: a corrupted key', async (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      const bytes = await cache.save();
      bytes[100] ^= 1;
      return ctx.mha.loadKVCache(bytes);
    }, REJECTS(/^loadKVCache: bytes: the padding's, keys' and values' checksum \(CRC-32\) does not match/)],
    ['save on a disposed cache', (ctx) => disposed(cacheOf(ctx)).save(),
      REJECTS(/^save: expected a live KVCache, received one that was disposed$/)],
    ['select([1, 1, 0]) after an unawaited forward', async (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      const beams = made(ctx, await cache.select(Int32Array.of(1, 1, 0)));
      return [beams.batchSize, beams.length, beams.maxLength, beams.dtype];
    }, RESOLVES],
    ['select: an index out of range', (ctx) => cacheOf(ctx).select(Int32Array.of(0, 2)),
      REJECTS(/^select: indices\[1\]: expected an index in \[0, 2\) \(the cache's batch_size\), got 2$/)],
    ['select: an Array', (ctx) => cacheOf(ctx).select([0]),
      REJECTS(/^select: indices: expected an Int32Array of at least one entry/)],
    ['clone after an unawaited forward, a step on each: the same bits', async (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      const clone = made(ctx, await cache.clone());
      await sameStep(ctx, cache, clone);
      return [clone.batchSize, clone.length, clone.maxLength];
    }, RESOLVES],
    ['resize after an unawaited forward', async (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      await cache.resize(32);
      return [cache.maxLength, cache.bytes, cache.length];
    }, RESOLVES],
    ['resize below the keys of an unawaited forward', (ctx) => {
      const cache = cacheOf(ctx);
      forwardInto(ctx, cache);
      return cache.resize(6);
    }, REJECTS(/^resize: expected a max_length >= 7 \(the keys the cache holds per entry; truncate first to hold fewer\), got 6; the cache is left as it was$/)],
    ['resize(0)', (ctx) => cacheOf(ctx).resize(0), REJECTS(/^resize: maxLength: expected a positive integer, received number 0$/)],

    // scaledDotProductAttention.
    ['sdpa', ({ lib }) => lib.scaledDotProductAttention(q4, k4, k4), RESOLVES],
    ['sdpa: {data, dims} tensors and mask', ({ lib }) => lib.scaledDotProductAttention(dims(q4), dims(k4), dims(k4),
      { attnMask: { data: new Uint8Array(15).fill(1), dims: [3, 5] } }), RESOLVES],
    ['sdpa: query a number', ({ lib }) => lib.scaledDotProductAttention(3, k4, k4),
      REJECTS(/^query: expected a tensor \{data, shape\} or \{data, dims\}, received number 3$/)],
    ['sdpa: key and value null without a cache', ({ lib }) => lib.scaledDotProductAttention(q4, null, null),
      REJECTS(/^key, value: both null attends the keys of a cache only, and there is no cache/)],
    ['sdpa: window null', ({ lib }) => lib.scaledDotProductAttention(q4, k4, k4, { window: null }), RESOLVES],
    // Any finite scale, as PyTorch's (the core's rule, web/src/option_rules.js), but 0: JS asks
    // for the default with undefined.
    ['sdpa: scale -1', ({ lib }) => lib.scaledDotProductAttention(q4, k4, k4, { scale: -1 }), RESOLVES],
    ['sdpa: scale 0', ({ lib }) => lib.scaledDotProductAttention(q4, k4, k4, { scale: 0 }),
      REJECTS(/^scale: expected a nonzero finite number \(or undefined for 1\/sqrt\(E\)\), received number 0$/)],
    ['sdpa: cache not a KVCache', ({ lib }) => lib.scaledDotProductAttention(q4, k4, k4, { cache: {} }),
      REJECTS(/^cache: expected a KVCache from createKVCache of this library/)],
    ['sdpa: a disposed cache', (ctx) => ctx.lib.scaledDotProductAttention(q4, k4, k4,
      { cache: disposed(made(ctx, ctx.lib.createKVCache(sdpaCache))) }),
    REJECTS(/^cache: expected a live KVCache, received one that was disposed$/)],
    ['sdpa: value length differs from key length', ({ lib }) =>
      lib.scaledDotProductAttention(q4, k4, zeros([2, 4, 6, 8])), REJECTS(/value: expected shape \(2, 4, 5, 8\).*got \(2, 4, 6, 8\)/)],
    ['sdpa with a cache, then truncate beyond it', (ctx) => {
      const cache = made(ctx, ctx.lib.createKVCache(sdpaCache));
      ctx.lib.scaledDotProductAttention(q4, k4, k4, { cache });
      return cache.truncate(6);
    }, REJECTS(/^truncate: expected a length in \[0, 5\]/)],

    // The library's other calls.
    ['listAttentionModules', ({ lib }) => lib.listAttentionModules(fixture.bytes), RESOLVES],
    ['listAttentionModules: a string', ({ lib }) => lib.listAttentionModules('model.safetensors'),
      REJECTS(/^listAttentionModules: bytes: expected a Uint8Array, an ArrayBuffer, a Blob, a Response or a ReadableStream/)],
    ['listAttentionModules: no shards', ({ lib }) => lib.listAttentionModules([]),
      REJECTS(/^listAttentionModules: bytes: .*received an empty array$/)],
    ['listAttentionModules: bytes that are not a safetensors file', ({ lib }) =>
      lib.listAttentionModules(new Uint8Array(20)), REJECTS(/^listAttentionModules: /)],
    ['heapInfo', ({ lib }) => lib.heapInfo().then((info) => Object.keys(info)), RESOLVES],
  ];
  return rows.map(([what, call, expected]) => ({ what, call, expected }));
}

// Every row's outcome on `lib`, in order: [{what, kind, ...}].
export async function runContract(lib, fixture, MHAError) {
  const mha = lib.createMultiheadAttention(moduleConfig(fixture.config));
  await mha.loadSafetensors(fixture.bytes, { prefix: 'param.' });
  const ctx = { lib, mha, made: [] };
  const outcomes = [];
  for (const { what, call } of contractTable(fixture)) {
    outcomes.push({ what, ...await outcomeOf(() => call(ctx), MHAError) });
  }
  for (const object of [mha, ...ctx.made]) object.dispose();
  return outcomes;
}

// Whether an outcome is what its row expects: '' or what differs.
export function unexpected({ kind, mhaError, message }, expected) {
  const [want, pattern] = Object.entries(expected)[0];
  if (kind !== want) return `expected it to ${want}, it ${kind === 'throws' ? 'threw' : kind}: ${message ?? ''}`;
  if (pattern === true) return '';
  if (!mhaError) return `expected an MHAError, got: ${message}`;
  return pattern.test(message) ? '' : `expected a message matching ${pattern}, got: ${message}`;
}

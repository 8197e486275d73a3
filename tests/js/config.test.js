// web/src/config.js against the core it mirrors, over many configurations
// drawn at random: the JS checks refuse exactly the configs and caches the
// core refuses, with the core's messages (so that a create fails in the
// caller's thread in both modes, proxy included), and the parameters JS
// computes from a config are the core's own list: a state_dict of them loads
// (the core refuses a name the config has not, a missing one and a wrong shape).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import {
  checkConfigRules, checkModuleCacheOptions, coreConfig, parametersOf, resolvedDims,
} from '../../web/src/config.js';
import { keepOf } from '../../web/src/kv_cache.js';
import { checkSdpaCache, wasmOf } from '../../web/src/library.js';

const CONFIGS = 3000;
const HUGE = 2 ** 24 + 2;   // refused by a rule before anything is allocated
// Caches larger than this that JS accepts are not made in the core.
const MAX_CACHE_BYTES = 1 << 24;

let state = 20;
const random = () => {
  state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
  return state / 2 ** 32;
};
const pick = (values) => values[Math.floor(random() * values.length)];
const maybe = (values) => (random() < 0.5 ? undefined : pick(values));

const WEIGHTS_DTYPES = [undefined, 'auto', 'float32', 'float16', 'bfloat16', 'int8'];
let configsDrawn = 0;

function randomConfig() {
  const config = {
    embedDim: pick([1, 2, 3, 4, 6, 8, 12, 16, 16, 16, HUGE]),
    numHeads: pick([1, 2, 3, 4, 8]),
    bias: pick([true, false]),
    addBiasKV: pick([false, false, true]),
    addZeroAttn: pick([false, false, true]),
    kdim: maybe([1, 5, 16, HUGE]),
    vdim: maybe([1, 7, 16]),
    qkHeadDim: maybe([1, 2, 3, 4, 8]),
    vHeadDim: maybe([1, 2, 4, 6]),
    numKVHeads: maybe([1, 2, 3, 4, 8]),
    dropout: pick([0, 0, 0.1, 0.5, 1 - 1e-12, 1, -0.25, -1e-50, NaN]),
    // Bad score options rarely, so that enough configs are made.
    scale: random() < 0.9 ? maybe([0.125, 1, 0.5, 1e-50, 0]) : pick([1e39, -1, NaN]),
    softcap: random() < 0.9 ? maybe([50, 30, 0.5, 0]) : pick([1e39, -1, Infinity]),
    // Refused with addBiasKV / addZeroAttn.
    window: random() < 0.8 ? undefined : pick([1, 4, [2, 1], [0, 0]]),
    sinks: maybe([true, false]),   // a parameter: the lists must agree
    // Refused with addBiasKV / addZeroAttn, or slopes not numHeads of them.
    alibi: random() < 0.92 ? undefined : pick([true, { symmetric: true },
      { slopes: new Float32Array([0.5, 0.25]) }, { slopes: new Float32Array([1, NaN]) }]),
    // In turn, not drawn: the draws of the other fields stay as they were.
    weightsDtype: WEIGHTS_DTYPES[configsDrawn++ % WEIGHTS_DTYPES.length],
  };
  if (random() < 0.5) {
    config.rotary = {
      dim: maybe([1, 2, 3, 4, 6, 8, 16]),
      base: random() < 0.2 ? undefined
        : pick([10000, 10000, 500000, 1, 1e-300, 5e-324, 1e300, 1e301, 1e308, 0, -1, Infinity, NaN]),
      interleaved: pick([true, false]),
    };
    // Scaled, or given outright (refused with base or scaling), and their bad values.
    if (random() < 0.3) config.rotary.scaling = pick(SCALINGS);
    if (random() < (config.rotary.base === undefined ? 0.5 : 0.05)) {
      config.rotary.invFreq = pick(INV_FREQS);
    }
    if (random() < 0.1) config.rotary.attentionFactor = pick([1.2, 0.5, 0, NaN]);
  }
  return config;
}

const yarn = { rope_type: 'yarn', factor: 32, original_max_position_embeddings: 4096 };
const SCALINGS = [
  null, { rope_type: 'default' }, { type: 'linear', factor: 4 }, { type: 'linear', factor: 0 },
  { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4,
    original_max_position_embeddings: 8192 },
  { rope_type: 'llama3', factor: 8, low_freq_factor: 4, high_freq_factor: 4,
    original_max_position_embeddings: 8192 },
  { rope_type: 'llama3', factor: 8, low_freq_factor: 1, high_freq_factor: 4 },
  yarn, { ...yarn, truncate: false, beta_fast: 16, attention_factor: 1.1 },
  { ...yarn, mscale: 1, mscale_all_dim: 0.7 }, { ...yarn, mscale: -100, mscale_all_dim: 1 },
  { ...yarn, mscale: Infinity }, { ...yarn, beta_slow: -1 }, { ...yarn, factor: undefined },
  { ...yarn, attention_factor: NaN }, { type: 'dynamic', factor: 2 },
];
const INV_FREQS = [new Float32Array([1, 0.5]), new Float32Array([1]),
  new Float32Array([0.5, NaN]), new Float32Array([1, 0.1, 0.01, 0.001])];

// streaming: whether `rolling` may be { keep } (a module's caches only).
function randomCacheOptions(streaming) {
  const dim = () => pick([1, 2, 3, 8, 2 ** 20, 2 ** 31, 2 ** 41, 2 ** 53 - 1]);
  return { batchSize: dim(), maxLength: dim(), dtype: pick(['float32', 'float16']),
    rolling: pick(streaming ? [false, true, { keep: pick([0, 1, 4, 2 ** 20]) }] : [false, true]) };
}

// The bytes of a cache's keys and values, as the core allocates them.
function cacheBytes({ batchSize, maxLength, dtype }, heads, headDim, vHeadDim) {
  return batchSize * maxLength * heads * (headDim + vHeadDim) * (dtype === 'float16' ? 2 : 4);
}

// The JS check's message, or '' when it accepts.
function jsError(check) {
  try {
    check();
    return '';
  } catch (error) {
    return error.message;
  }
}

// The core's message for a failed status, prefixed as the JS API prefixes it.
const coreError = (code, result, what) => (code === 0 ? '' : `${what}: ${result.message()}`);

// The messages without the value received (C++ and JS print numbers differently).
const rule = (message) => message.replace(/(, )?(got|received) [^,]*$/, '');

let lib;
let wasm;
let result;
before(async () => {
  lib = await loadMHA({ build: 'simd', threads: 1 });
  wasm = wasmOf(lib);
  result = new wasm.CallResult();
});
after(() => result.delete());

function assertSameVerdict(js, core, what) {
  assert.equal(Boolean(js), Boolean(core), `${what}: JS says '${js}', the core '${core}'`);
  assert.equal(rule(js), rule(core), what);
}

// Zeros for each parameter of `specs` ([{name, shape}]).
const zerosFor = (specs) => Object.fromEntries(specs.map(({ name, shape }) =>
  [name, { data: new Float32Array(shape.reduce((a, b) => a * b, 1)), shape }]));

test(`${CONFIGS} configs: JS refuses what the core refuses and knows its parameters`, async () => {
  let made = 0;
  let caches = 0;
  for (let i = 0; i < CONFIGS; i++) {
    const config = randomConfig();
    const what = JSON.stringify(config);
    // A scale or softcap that is 0 as a float32 (1e-50) is JS's refusal alone:
    // the core would take it for the default.
    if (jsError(() => coreConfig(config)).includes('is 0 as a float32')) continue;
    const c = coreConfig(config);
    const binding = new wasm.MultiheadAttention();
    try {
      const js = jsError(() => checkConfigRules(c));
      const core = coreError(binding.create(c, result), result, 'createMultiheadAttention');
      assertSameVerdict(js, core, what);
      if (core) continue;
      made++;
      const mha = lib.createMultiheadAttention(config);
      await mha.loadStateDict(zerosFor(parametersOf(c)))
        .catch((error) => assert.fail(`${what}: ${error.message}`));
      mha.dispose();
      for (let j = 0; j < 3; j++) {
        const options = randomCacheOptions(true);
        const js = jsError(() => checkModuleCacheOptions(c, options));
        const d = resolvedDims(c);
        if (!js && cacheBytes(options, d.numKVHeads, d.qkHeadDim, d.vHeadDim) > MAX_CACHE_BYTES) {
          continue;
        }
        const cache = new wasm.KVCache();
        const core = coreError(binding.createKVCache(cache, options.batchSize, options.maxLength,
          options.dtype, options.rolling === true, keepOf(options.rolling), result), result, 'createKVCache');
        cache.delete();
        assertSameVerdict(js, core, `${what}, cache ${JSON.stringify(options)}`);
        caches++;
      }
    } finally {
      binding.delete();
    }
  }
  // The draw must reach both verdicts often.
  assert.ok(made > CONFIGS / 20 && made < CONFIGS * 0.9, `${made} of ${CONFIGS} made`);
  assert.ok(caches > made, `${caches} caches compared`);
});

test('weightsDtype: the binding refuses a dtype it does not know with the JS message', () => {
  const js = jsError(() => coreConfig({ embedDim: 4, numHeads: 1, weightsDtype: 'fp8' }));
  assert.match(js, /^weightsDtype: .*'int8', received the string 'fp8'$/);
  const binding = new wasm.MultiheadAttention();
  try {
    const c = { ...coreConfig({ embedDim: 4, numHeads: 1 }), weights_dtype: 'fp8' };
    assert.equal(coreError(binding.create(c, result), result, 'create'), `create: ${js}`);
  } finally {
    binding.delete();
  }
});

test('lib.createKVCache: JS refuses what the core refuses', () => {
  let compared = 0;
  for (let i = 0; i < CONFIGS; i++) {
    const options = { ...randomCacheOptions(), numKVHeads: pick([1, 2, 8, 2 ** 20]),
      headDim: pick([1, 4, 64, 2 ** 20]), vHeadDim: pick([undefined, 1, 128]) };
    const js = jsError(() => checkSdpaCache(options));
    const vHeadDim = options.vHeadDim ?? options.headDim;
    if (!js && cacheBytes(options, options.numKVHeads, options.headDim, vHeadDim) > MAX_CACHE_BYTES) {
      continue;
    }
    const cache = new wasm.KVCache();
    const core = coreError(cache.createFree({
      batch_size: options.batchSize, max_length: options.maxLength, dtype: options.dtype,
      num_kv_heads: options.numKVHeads, head_dim: options.headDim, v_head_dim: vHeadDim,
      rolling: options.rolling,
    }, result), result, 'createKVCache');
    cache.delete();
    assertSameVerdict(js, core, JSON.stringify(options));
    compared++;
  }
  assert.ok(compared > CONFIGS / 2, `${compared} compared`);
});

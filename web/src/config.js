// A MultiheadAttention's configuration, checked in JS as the core checks it
// (MultiheadAttention::Create and CreateKVCache in src/multihead_attention.cc,
// with the same messages), so that a create that fails throws in the caller's
// thread in both modes, proxy included (where the core is in another thread);
// and what follows from it alone: the state_dict entries the module has. The
// numeric options' bounds and the sizes refused are the core's own
// (option_rules.js, written from its table); the rules between options follow
// its code, and tests/js/config.test.js holds the two sides to each other over
// many configurations.
import { MHAError } from './errors.js';
import { checkCacheOptions, checkCacheSize, keepOf } from './kv_cache.js';
import { LIMITS, OPTION_RULES } from './option_rules.js';
import { checkRotaryRules, rotaryOptions } from './rotary_config.js';
import {
  checkBoolean, checkChoice, checkNumber, checkOptionalDim, checkOptionsObject, checkPositiveInteger,
  describe,
} from './validate.js';

const CONFIG_KEYS = ['embedDim', 'numHeads', 'bias', 'addBiasKV', 'addZeroAttn', 'kdim', 'vdim',
  'batchFirst', 'qkHeadDim', 'vHeadDim', 'dropout', 'numKVHeads', 'rotary', 'scale', 'softcap',
  'window', 'sinks', 'alibi', 'qkNorm', 'weightsDtype'];
// weightsDtype: how the projection weights are kept (docs/design.md, "Precision").
const WEIGHTS_DTYPES = ['auto', 'float32', 'float16', 'bfloat16', 'int8'];

const isWindowSide = (x) => Number.isSafeInteger(x) && x >= 0 && x < 2 ** 31;

// window: undefined or null (config.json's sliding_window of a model without
// one: Mistral v0.2+, Qwen3), a number W (Hugging Face's sliding_window: the
// query's key and the W - 1 before it) or [left, right] (FlashAttention's
// window_size), as the core's {left, right} (-1: no bound on that side).
export function windowOption(window) {
  if (window === undefined || window === null) return { left: -1, right: -1 };
  if (isWindowSide(window) && window > 0) return { left: window - 1, right: -1 };
  if (Array.isArray(window) && window.length === 2 && window.every(isWindowSide)) {
    return { left: window[0], right: window[1] };
  }
  throw new MHAError('window: expected a positive integer W or [left, right] of non-negative ' +
                     `integers (below 2^31), received ${describe(window)}`);
}

// alibi: undefined, false or null (none: config.json's alibi of Falcon-7B),
// true, or {slopes: Float32Array of numHeads, symmetric}.
function alibiOptions(alibi) {
  if (alibi === undefined || alibi === false || alibi === null) return undefined;
  if (alibi === true) return { symmetric: false };
  const o = checkOptionsObject(alibi, 'alibi', ['slopes', 'symmetric']);
  if (o.slopes !== undefined && !(o.slopes instanceof Float32Array)) {
    throw new MHAError(`alibi.slopes: expected a Float32Array of numHeads slopes, received ${
      describe(o.slopes)}`);
  }
  const options = { symmetric: checkBoolean(o.symmetric, 'alibi.symmetric', false) };
  if (o.slopes !== undefined) options.slopes = o.slopes;
  return options;
}

// qkNorm: undefined, or {type, over, eps, weightOffset} (docs/design.md's defaults).
function qkNormOptions(qkNorm) {
  if (qkNorm === undefined) return undefined;
  const o = checkOptionsObject(qkNorm, 'qkNorm', ['type', 'over', 'eps', 'weightOffset']);
  return {
    type: checkChoice(o.type, 'qkNorm.type', ['rms', 'layer']),
    over: checkChoice(o.over, 'qkNorm.over', ['head', 'all']),
    eps: checkNumber(o.eps ?? 1e-6, 'qkNorm.eps'),
    weight_offset: checkNumber(o.weightOffset ?? 0, 'qkNorm.weightOffset'),
  };
}

// The config in the core's names and types (0: the default), every value of
// the type the binding reads; the core's rules are checkConfigRules'.
export function coreConfig(config) {
  const name = 'createMultiheadAttention';
  if (config === undefined) {
    throw new MHAError(`${name}: expected an options object with embedDim and numHeads, ` +
                       'received undefined');
  }
  checkOptionsObject(config, name, CONFIG_KEYS);
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
    dropout: checkNumber(config.dropout ?? 0, 'dropout'),
    num_kv_heads: checkOptionalDim(config.numKVHeads, 'numKVHeads'),
    rotary: rotaryOptions(config.rotary),
    scale: checkFloat32Option(checkNumber(config.scale ?? 0, 'scale'), 'scale', 'the default', '0'),
    softcap: checkFloat32Option(checkNumber(config.softcap ?? 0, 'softcap'), 'softcap', 'none', '0'),
    window: windowOption(config.window),
    sinks: checkBoolean(config.sinks, 'sinks', false),
    alibi: alibiOptions(config.alibi),
    qk_norm: qkNormOptions(config.qkNorm),
    weights_dtype: checkChoice(config.weightsDtype, 'weightsDtype', WEIGHTS_DTYPES),
  };
}

// The dims a core config resolves to (its defaults filled in).
export function resolvedDims(c) {
  const headDim = Math.floor(c.embed_dim / c.num_heads);
  return {
    kdim: c.kdim || c.embed_dim,
    vdim: c.vdim || c.embed_dim,
    qkHeadDim: c.qk_head_dim || headDim,
    vHeadDim: c.v_head_dim || headDim,
    numKVHeads: c.num_kv_heads || c.num_heads,
  };
}

// A scale or softcap as the float32 the core receives, where 0 means the
// default or none: a nonzero value that rounds to 0 there would silently
// become that, and is refused. `unset`: how the caller asks for 0.
export function checkFloat32Option(value, name, zero, unset) {
  if (typeof value === 'number' && value !== 0 && Math.fround(value) === 0) {
    throw new MHAError(`${name}: ${value} is 0 as a float32 (what the core computes in), which ` +
                       `would mean ${zero}: give a larger value, or ${unset} for ${zero}`);
  }
  return value;
}

// The core's rule for option `name` of `call` (option_rules.js, written from the core's table)
// on the float32 the core receives: fail(message) with the core's message.
export function checkOptionRule(call, name, value, fail) {
  const rule = OPTION_RULES.find((r) => r.call === call && r.name === name);
  const received = Math.fround(value);
  const aboveMin = rule.minExcluded ? received > rule.min : received >= rule.min;
  if (!(Number.isFinite(received) && aboveMin && received < rule.max)) {
    fail(`${name}: expected ${rule.expected}, received ${describe(value)}`);
  }
}

// The score options' rules of a module's config; `fail` prefixes the message.
export function checkScoreRules({ scale, softcap }, fail) {
  checkOptionRule('module', 'scale', scale, fail);
  checkOptionRule('module', 'softcap', softcap, fail);
}

// MultiheadAttention::Create's rules, in its order and with its messages
// (prefixed as the in-thread call prefixes the core's).
export function checkConfigRules(c) {
  const fail = (message) => { throw new MHAError(`createMultiheadAttention: ${message}`); };
  if ((c.qk_head_dim === 0 || c.v_head_dim === 0) && c.embed_dim % c.num_heads !== 0) {
    fail(`num_heads: embed_dim (${c.embed_dim}) must be divisible by num_heads (${c.num_heads})`);
  }
  checkOptionRule('module', 'dropout', c.dropout, fail);
  if ([c.embed_dim, c.num_heads, c.kdim, c.vdim, c.qk_head_dim, c.v_head_dim]
    .some((dim) => dim > LIMITS.maxDim)) {
    fail('config: dims above 2^24 are not supported');
  }
  if (c.num_kv_heads > c.num_heads || (c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads !== 0)) {
    fail(`num_kv_heads: expected a divisor of num_heads (${c.num_heads}) or 0 for num_heads, ` +
         `got ${c.num_kv_heads}`);
  }
  checkScoreRules(c, fail);
  for (const [on, name] of [[c.window.left >= 0 || c.window.right >= 0, 'window'],
    [c.alibi !== undefined, 'alibi']]) {
    if (on && (c.add_bias_kv || c.add_zero_attn)) {
      fail(`${name}: cannot be combined with add_bias_kv or add_zero_attn (their keys have no ` +
           'position)');
    }
  }
  const slopes = c.alibi?.slopes;
  if (slopes !== undefined && (slopes.length !== c.num_heads ||
                               !slopes.every((s) => Number.isFinite(s)))) {
    fail(`alibi.slopes: expected num_heads (${c.num_heads}) finite slopes, got ${slopes.length}`);
  }
  if (c.qk_norm !== undefined) {
    checkOptionRule('module', 'qk_norm.eps', c.qk_norm.eps, fail);
    checkOptionRule('module', 'qk_norm.weight_offset', c.qk_norm.weight_offset, fail);
  }
  if (c.rotary !== undefined) checkRotaryRules(c.rotary, resolvedDims(c).qkHeadDim, fail);
}

// createMultiheadAttention's config as the core's, or throws what the core would.
export function checkConfig(config) {
  const c = coreConfig(config);
  checkConfigRules(c);
  return c;
}

// [{name, shape}]: the state_dict entries of a module of core config `c`, in
// state_dict order (MultiheadAttention::Parameters).
export function parametersOf(c) {
  const E = c.embed_dim;
  const d = resolvedDims(c);
  const qk = c.num_heads * d.qkHeadDim;
  const vv = c.num_heads * d.vHeadDim;
  const kk = d.numKVHeads * d.qkHeadDim;
  const kv = d.numKVHeads * d.vHeadDim;
  const packed = d.kdim === E && d.vdim === E && qk === E && vv === E &&
    d.numKVHeads === c.num_heads;
  const specs = packed ? [['in_proj_weight', [3 * E, E]]] : [
    ['q_proj_weight', [qk, E]], ['k_proj_weight', [kk, d.kdim]], ['v_proj_weight', [kv, d.vdim]],
  ];
  if (c.bias) specs.push(['in_proj_bias', [qk + kk + kv]]);
  if (c.add_bias_kv) specs.push(['bias_k', [1, 1, kk]], ['bias_v', [1, 1, kv]]);
  specs.push(['out_proj.weight', [E, vv]]);
  if (c.bias) specs.push(['out_proj.bias', [E]]);
  if (c.sinks) specs.push(['sinks', [c.num_heads]]);
  if (c.qk_norm !== undefined) {
    const all = c.qk_norm.over === 'all';
    specs.push(['q_norm.weight', [all ? qk : d.qkHeadDim]], ['k_norm.weight', [all ? kk : d.qkHeadDim]]);
  }
  return specs.map(([name, shape]) => ({ name, shape }));
}

// mha.createKVCache's options ({batchSize, maxLength, dtype}) for a module of
// core config `c`, checked as MultiheadAttention::CreateKVCache would.
export function checkModuleCacheOptions(c, options) {
  const checked = checkCacheOptions(options, 'createKVCache');
  if (c.add_bias_kv || c.add_zero_attn) {
    throw new MHAError('createKVCache: cache: a module with add_bias_kv or add_zero_attn cannot ' +
                       'decode with a cache');
  }
  const d = resolvedDims(c);
  const bytes = checkCacheSize(checked, d.numKVHeads, d.qkHeadDim, d.vHeadDim);
  const keep = keepOf(checked.rolling);
  if (keep >= checked.maxLength) {
    throw new MHAError('createKVCache: cache: rolling.keep: expected an integer in [0, max_length ' +
                       `- 1] = [0, ${checked.maxLength - 1}] (the keys kept as sinks), got ${keep}`);
  }
  if (checked.rolling === true && c.window.left < 0) {
    throw new MHAError('createKVCache: cache: rolling needs a module with a finite left window ' +
                       '(window), and this module has none: every key stays visible, so none ' +
                       'may be dropped (rolling: { keep } makes a StreamingLLM cache, which needs ' +
                       'none)');
  }
  return { ...checked, bytes };
}

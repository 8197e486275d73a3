// The rotary option of createMultiheadAttention (docs/design.md, "The attention of
// today's models", step 3): its types (rotaryOptions, to the core's names)
// and the core's rules with its messages (checkRotaryRules mirrors
// ResolveRotary and RotaryTable, src/core/multihead_attention.cc and
// src/attention/rope_scaling.cc).
import { MHAError } from './errors.js';
import {
  checkBoolean, checkNumber, checkOptionalDim, checkOptionsObject, describe,
} from './validate.js';

// Hugging Face's rope_scaling keys, as config.json has them.
const SCALING_NUMBERS = ['factor', 'low_freq_factor', 'high_freq_factor',
  'original_max_position_embeddings', 'beta_fast', 'beta_slow', 'attention_factor', 'mscale',
  'mscale_all_dim'];
const SCALING_KEYS = ['rope_type', 'type', 'truncate', ...SCALING_NUMBERS];

// A config.json value: null (Python's None) is absent.
const given = (value) => value !== undefined && value !== null;

// The kinds the core computes; any other is refused by name (checkScaling).
const SCALING_KINDS = ['default', 'linear', 'llama3', 'yarn'];

// rope_scaling (null or undefined: none) as the core's RopeScaling.
function scalingOptions(scaling) {
  if (!given(scaling)) return undefined;
  const o = checkOptionsObject(scaling, 'rotary.scaling', Object.keys(scaling));
  const kinds = [o.rope_type, o.type].filter(given);
  if (kinds.length === 0 || kinds.some((kind) => typeof kind !== 'string' || kind !== kinds[0])) {
    throw new MHAError('rotary.scaling: expected rope_type (or type) naming the kind, received ' +
                       `${describe(o.rope_type)} and ${describe(o.type)}`);
  }
  // An unsupported kind's own keys (longrope's short_factor, ...) are not the
  // error: its name is.
  if (!SCALING_KINDS.includes(kinds[0])) return { type: kinds[0], truncate: true };
  checkOptionsObject(o, 'rotary.scaling', SCALING_KEYS);
  const options = { type: kinds[0],
    truncate: checkBoolean(o.truncate ?? undefined, 'rotary.scaling.truncate', true) };
  for (const key of SCALING_NUMBERS) {
    if (given(o[key])) options[key] = checkNumber(o[key], `rotary.scaling.${key}`);
  }
  return options;
}

// rotary: undefined, or {dim, base, interleaved, scaling, invFreq, attentionFactor}.
export function rotaryOptions(rotary) {
  if (rotary === undefined) return undefined;
  const o = checkOptionsObject(rotary, 'rotary',
    ['dim', 'base', 'interleaved', 'scaling', 'invFreq', 'attentionFactor']);
  if (o.invFreq !== undefined && !(o.invFreq instanceof Float32Array && o.invFreq.length > 0)) {
    throw new MHAError('rotary.invFreq: expected a non-empty Float32Array of dim / 2 inverse ' +
                       `frequencies, received ${describe(o.invFreq)}`);
  }
  const options = {
    dim: checkOptionalDim(o.dim, 'rotary.dim'),
    interleaved: checkBoolean(o.interleaved, 'rotary.interleaved', false),
    scaling: scalingOptions(o.scaling),
  };
  if (o.base !== undefined) options.base = checkNumber(o.base, 'rotary.base');
  if (o.invFreq !== undefined) options.inv_freq = o.invFreq;
  if (o.attentionFactor !== undefined) {
    options.attention_factor = checkNumber(o.attentionFactor, 'rotary.attentionFactor');
  }
  return options;
}

const isPositive = (x) => Number.isFinite(x) && x > 0;

function positive(name, value, fail) {
  if (!isPositive(value)) fail(`${name}: expected a positive finite number, received ${describe(value)}`);
  return value;
}

// A rope_scaling field: positive and finite; required by the kind unless it
// has a fallback (Field in rope_scaling.cc).
function field(s, key, fail, fallback) {
  const name = `rotary.scaling.${key}`;
  if (s[key] === undefined && fallback === undefined) {
    fail(`${name}: required by rope_type '${s.type}'`);
  }
  return positive(name, s[key] ?? fallback, fail);
}

function checkScaling(s, base, fail) {
  if (s.type === 'linear') {
    field(s, 'factor', fail);
  } else if (s.type === 'llama3') {
    for (const key of ['factor', 'low_freq_factor', 'high_freq_factor',
      'original_max_position_embeddings']) field(s, key, fail);
    if (!(s.high_freq_factor > s.low_freq_factor)) {
      fail('rotary.scaling.high_freq_factor: expected a number above low_freq_factor, ' +
           `received ${describe(s.high_freq_factor)}`);
    }
  } else if (s.type === 'yarn') {
    const factor = field(s, 'factor', fail);
    field(s, 'original_max_position_embeddings', fail);
    field(s, 'beta_fast', fail, 32);
    field(s, 'beta_slow', fail, 1);
    for (const key of ['mscale', 'mscale_all_dim']) {
      if (s[key] !== undefined && !Number.isFinite(s[key])) {
        fail(`rotary.scaling.${key}: expected a finite number, received ${describe(s[key])}`);
      }
    }
    const mscale = (m) => (factor <= 1 ? 1 : 0.1 * m * Math.log(factor) + 1);
    if (s.attention_factor !== undefined) {
      field(s, 'attention_factor', fail);
    } else if (s.mscale && s.mscale_all_dim && !isPositive(mscale(s.mscale) / mscale(s.mscale_all_dim))) {
      fail('rotary.scaling.mscale_all_dim: the attention factor mscale and mscale_all_dim give ' +
           `is not a positive finite number, received ${mscale(s.mscale) / mscale(s.mscale_all_dim)}`);
    }
    if (base === 1) fail(`rotary.base: YaRN needs a base other than 1, received ${describe(base)}`);
  } else if (s.type !== 'default') {
    fail(`rotary.scaling: rope_type '${s.type}' is not supported (expected default, linear, ` +
         'llama3 or yarn; any other table: rotary.inv_freq and rotary.attention_factor, as ' +
         'transformers computes them)');
  }
}

// The core's rotary rules, in its order, for a module whose heads have
// qkHeadDim features; `fail` throws.
export function checkRotaryRules(r, qkHeadDim, fail) {
  const dim = r.dim || (r.inv_freq ? 2 * r.inv_freq.length : qkHeadDim);
  if (dim % 2 !== 0 || dim > qkHeadDim) {
    fail(`rotary.dim: expected an even number of features <= qk_head_dim (${qkHeadDim}), ` +
         `got ${dim}`);
  }
  if (r.inv_freq) {
    if (r.base !== undefined) fail('rotary.inv_freq: cannot be combined with rotary.base');
    if (r.scaling) fail('rotary.inv_freq: cannot be combined with rotary.scaling');
    if (r.inv_freq.length !== dim / 2 || !r.inv_freq.every((f) => Number.isFinite(f))) {
      fail(`rotary.inv_freq: expected dim / 2 (${dim / 2}) finite entries, got ${r.inv_freq.length}`);
    }
  }
  if (r.base !== undefined) positive('rotary.base', r.base, fail);
  if (r.attention_factor !== undefined) {
    if (r.scaling) {
      fail('rotary.attention_factor: cannot be combined with rotary.scaling (YaRN\'s is its ' +
           'attention_factor)');
    }
    positive('rotary.attention_factor', r.attention_factor, fail);
  }
  if (r.inv_freq === undefined && r.scaling) checkScaling(r.scaling, r.base ?? 10000, fail);
}

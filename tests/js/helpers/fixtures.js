// The committed PyTorch fixtures (tests/fixtures/README.md), run through the
// JS API the way a user would.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { fixtureFromBytes, moduleConfig } from './fixture_data.js';

export { moduleConfig };

export const FIXTURE_DIR = new URL('../../fixtures/', import.meta.url);

export function fixtureNames() {
  return readdirSync(FIXTURE_DIR).filter((f) => f.endsWith('.safetensors')).sort();
}

export function loadFixture(name) {
  return fixtureFromBytes(name, new Uint8Array(readFileSync(new URL(name, FIXTURE_DIR))));
}

function tensor(fixture, name) {
  const t = fixture.tensors[name];
  return t && { data: t.data, shape: t.shape };
}

// Float32 parameters as a PyTorch state_dict ({name: Float32Array}).
export function stateDict(fixture) {
  const dict = {};
  for (const [name, t] of Object.entries(fixture.tensors)) {
    if (name.startsWith('param.')) dict[name.slice('param.'.length)] = t.data;
  }
  return dict;
}

// Runs the fixture; `via` is 'safetensors' or 'stateDict' (F32 params only).
export async function runFixture(lib, fixture, via = 'safetensors') {
  const c = fixture.config;
  const [query, key, value] = ['query', 'key', 'value'].map((n) => tensor(fixture, `input.${n}`));
  const attnMask = tensor(fixture, 'input.attn_mask');
  if (c.kind === 'sdpa') {
    const output = await lib.scaledDotProductAttention(query, key, value,
      { attnMask, isCausal: c.is_causal, scale: c.scale || undefined });
    return { output, weights: null };
  }
  const mha = lib.createMultiheadAttention(moduleConfig(c));
  try {
    if (via === 'stateDict') mha.loadStateDict(stateDict(fixture));
    else mha.loadSafetensors(fixture.bytes, { prefix: 'param.' });
    return await mha.forward(query, key, value, {
      keyPaddingMask: tensor(fixture, 'input.key_padding_mask'), attnMask,
      needWeights: c.need_weights, averageAttnWeights: c.average_attn_weights,
      isCausal: c.is_causal,
    });
  } finally {
    mha.dispose();
  }
}

// |a - e| <= slack (1e-4 + 1e-3 |e|), NaN exactly where expected, same shape.
export function assertClose(actual, expected, what, slack = 1) {
  assert.ok(actual, `${what}: missing`);
  assert.deepEqual(actual.shape, expected.shape, `${what}: shape`);
  assert.equal(actual.data.length, expected.data.length, `${what}: length`);
  for (let i = 0; i < expected.data.length; ++i) {
    const a = actual.data[i];
    const e = expected.data[i];
    if (Number.isNaN(e) || Number.isNaN(a)) {
      assert.ok(Number.isNaN(e) && Number.isNaN(a), `${what}[${i}]: got ${a}, expected ${e}`);
      continue;
    }
    assert.ok(Math.abs(a - e) <= slack * (1e-4 + 1e-3 * Math.abs(e)),
      `${what}[${i}]: got ${a}, expected ${e}`);
  }
}

export function assertMatchesFixture(result, fixture) {
  assertClose(result.output, tensor(fixture, 'expected.output'), `${fixture.name} output`);
  const weights = tensor(fixture, 'expected.weights');
  if (weights) assertClose(result.weights, weights, `${fixture.name} weights`);
  else assert.equal(result.weights, null, `${fixture.name}: weights not asked for`);
}

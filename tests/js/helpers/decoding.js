// The decoding fixtures (tests/fixtures/decoding/README.md): a schedule of
// calls on one KV cache, run through the JS API as a user would.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { assertClose, moduleConfig } from './fixtures.js';
import { readSafetensors } from './safetensors.js';

const DIR = new URL('../../fixtures/decoding/', import.meta.url);
// float16 storage: see tests/native/decoding_fixture_test.cc.
const FLOAT16_SLACK = 4;

export function decodingFixtures() {
  return readdirSync(DIR).filter((f) => f.endsWith('.safetensors')).sort().map((name) => {
    const bytes = new Uint8Array(readFileSync(new URL(name, DIR)));
    const { metadata, tensors } = readSafetensors(bytes);
    return { name, bytes, config: JSON.parse(metadata.config), tensors };
  });
}

function tensor(fixture, name) {
  const t = fixture.tensors[name];
  return t && { data: t.data, shape: t.shape };
}

async function makeCache(lib, fixture) {
  const c = fixture.config;
  if (c.mode !== 'sdpa') {
    const config = { ...moduleConfig(c), numKVHeads: c.num_kv_heads || undefined };
    if (c.rotary) config.rotary = c.rotary;
    const mha = lib.createMultiheadAttention(config);
    await mha.loadSafetensors(fixture.bytes, { prefix: 'param.' });
    return { mha, cache: mha.createKVCache({ batchSize: c.batch_size, maxLength: c.max_length,
      dtype: c.dtype }) };
  }
  const [, numKVHeads, , headDim] = fixture.tensors['step0.key'].shape;
  const vHeadDim = fixture.tensors['step0.value'].shape[3];
  return { mha: null, cache: lib.createKVCache({ batchSize: c.batch_size, numKVHeads, headDim,
    vHeadDim, maxLength: c.max_length, dtype: c.dtype }) };
}

// Runs every step and checks its output (and weights) against the fixture.
export async function runDecodingFixture(lib, fixture) {
  const c = fixture.config;
  const slack = c.dtype === 'float16' ? FLOAT16_SLACK : 1;
  const { mha, cache } = await makeCache(lib, fixture);
  try {
    for (const [i, step] of c.steps.entries()) {
      if (step.truncate >= 0) {
        await cache.truncate(step.truncate);
        assert.equal(cache.length, step.truncate);
        continue;
      }
      const t = (name) => tensor(fixture, `step${i}.${name}`);
      const query = t('query');
      const key = step.self ? query : t('key') ?? null;
      const value = step.self ? query : t('value') ?? null;
      let output;
      if (mha === null) {
        output = await lib.scaledDotProductAttention(query, key, value,
          { cache, isCausal: step.is_causal, enableGqa: c.enable_gqa });
      } else {
        const result = await mha.forward(query, key, value, {
          cache, isCausal: step.is_causal, needWeights: step.need_weights,
          averageAttnWeights: step.average_attn_weights,
          keyPaddingMask: t('key_padding_mask'), attnMask: t('attn_mask'),
        });
        output = result.output;
        if (step.need_weights) assertClose(result.weights, t('weights'), `step ${i} weights`, slack);
      }
      assertClose(output, t('output'), `${fixture.name} step ${i} output`, slack);
    }
  } finally {
    cache.dispose();
    mha?.dispose();
  }
}

// Weights from the modules people have, through the JS API on both builds:
// every layout fixture (a small model's checkpoint, whole or in two shards,
// F32/F16/BF16) loads with loadSafetensors and, in F32, loadStateDict, and
// reproduces the PyTorch module's output; listAttentionModules finds the
// modules the generator placed; errors are MHAErrors and change nothing.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { wasmOf } from '../../web/src/library.js';
import { BUILDS } from './helpers/builds.js';
import { assertClose } from './helpers/fixtures.js';
import { writeSafetensors } from './helpers/safetensors.js';
import {
  expectedOutput, layoutFixture, layoutFixtures, layoutModuleConfig, layoutStateDict,
  runLayoutForward, weightOptions,
} from './helpers/layout_fixtures.js';

const fixtures = layoutFixtures();

async function loadAndRun(lib, fixture, load) {
  const mha = lib.createMultiheadAttention(layoutModuleConfig(fixture.config));
  try {
    await load(mha);
    assertClose((await runLayoutForward(mha, fixture)).output, expectedOutput(fixture),
      `${fixture.name} output`);
  } finally {
    mha.dispose();
  }
}

async function rejectsWith(promise, pattern) {
  await assert.rejects(promise, (error) => {
    assert.ok(error instanceof MHAError, `expected an MHAError, got ${error}`);
    assert.match(error.message, pattern);
    return true;
  });
}

test('the fixtures cover every layout and both shard counts', () => {
  const detected = new Set(fixtures.map((f) => f.config.detected));
  assert.deepEqual([...detected].map(String).sort(), ['gpt2', 'neox', 'null', 'qkv-linear', 'torch']);
  assert.ok(fixtures.some((f) => f.shards.length === 2));
  assert.ok(fixtures.length >= 19);
});

for (const build of BUILDS) {
  describe(`weight layouts on ${build}`, () => {
    let lib;
    before(async () => { lib = await loadMHA({ build }); });

    for (const fixture of fixtures) {
      const bytes = fixture.shards.length === 1 ? fixture.shards[0] : fixture.shards;
      test(`${fixture.name} via loadSafetensors`, () =>
        loadAndRun(lib, fixture, (mha) => mha.loadSafetensors(bytes, weightOptions(fixture))));
      if (fixture.config.param_dtype === 'F32') {
        test(`${fixture.name} via loadStateDict`, () => loadAndRun(lib, fixture,
          (mha) => mha.loadStateDict(layoutStateDict(fixture), weightOptions(fixture))));
      }
      test(`${fixture.name}: listAttentionModules`, async () => {
        const found = await lib.listAttentionModules(bytes);
        assert.deepEqual(found.map((m) => ({
          prefix: m.prefix, layout: m.layout, embed_dim: m.embedDim, kdim: m.kdim, vdim: m.vdim,
          q_size: m.qSize, k_size: m.kSize, v_size: m.vSize, bias: m.bias,
        })), fixture.config.modules);
      });
    }

    test('a listed module loads with its prefix, layout and names', async () => {
      const fixture = layoutFixture('bert_kpm');
      const [, layer1] = await lib.listAttentionModules(fixture.shards[0]);
      assert.deepEqual(layer1.names,
        { q: 'self.query', k: 'self.key', v: 'self.value', out: 'output.dense' });
      await loadAndRun(lib, fixture, (mha) => mha.loadSafetensors(fixture.shards[0],
        { prefix: layer1.prefix, layout: layer1.layout, names: layer1.names }));
    });

    test('errors name the prefix, the tensors and the shapes, and change nothing', async () => {
      const fixture = layoutFixture('bert_kpm');
      const mha = lib.createMultiheadAttention(layoutModuleConfig(fixture.config));
      const bytes = fixture.shards[0];
      await mha.loadSafetensors(bytes, weightOptions(fixture));
      await rejectsWith(mha.loadSafetensors(bytes, { prefix: 'bert.encoder.layer.1.' }),
        /no attention module under prefix 'bert\.encoder\.layer\.1\.'.*attention\.self\.query\.weight.*nearest prefixes holding an attention module: 'bert\.encoder\.layer\.1\.attention\.' \(qkv-linear\)/);
      await rejectsWith(mha.loadSafetensors(bytes,
        { prefix: 'bert.encoder.layer.1.attention.', layout: 'gpt2' }), /layout gpt2/);
      const ambiguous = {
        'm.in_proj_weight': { data: new Float32Array(48 * 16), shape: [48, 16] },
        'm.q_proj.weight': { data: new Float32Array(256), shape: [16, 16] },
        'm.k_proj.weight': { data: new Float32Array(256), shape: [16, 16] },
        'm.v_proj.weight': { data: new Float32Array(256), shape: [16, 16] },
        'm.out_proj.weight': new Float32Array(256),
      };
      await rejectsWith(mha.loadStateDict(ambiguous, { prefix: 'm.' }),
        /prefix 'm\.' holds 2 candidate attention modules: torch, qkv-linear/);
      const narrow = lib.createMultiheadAttention(
        { ...layoutModuleConfig(fixture.config), qkHeadDim: 4 });
      await rejectsWith(narrow.loadSafetensors(bytes, weightOptions(fixture)),
        /self\.query\.weight: expected shape \(8, 16\) .*received \(16, 16\)/);
      narrow.dispose();
      await rejectsWith(mha.loadSafetensors(bytes, { layout: 'llama' }),
        /loadSafetensors: layout: expected one of auto, torch, qkv-linear, gpt2, neox, received the string 'llama'/);
      await rejectsWith(mha.loadSafetensors(bytes, { names: { query: 'q' } }),
        /names: unknown role 'query'/);
      await rejectsWith(mha.loadSafetensors([]), /bytes: expected .* received an empty array/);
      await rejectsWith(lib.listAttentionModules([bytes, 'x']),
        /listAttentionModules: bytes\[1\]: expected a Uint8Array, an ArrayBuffer, a Blob, a Response or a ReadableStream/);
      await rejectsWith(lib.listAttentionModules(new Uint8Array(20)), /listAttentionModules: /);
      // Still the module loaded first.
      assertClose((await runLayoutForward(mha, fixture)).output, expectedOutput(fixture),
        'after errors');
      mha.dispose();
    });

    // Hugging Face's names with the extra parameters of today's models (E 8, 2 query heads
    // and 1 key/value head of 4): Qwen3's shared norms, Chameleon's per head with a bias,
    // OLMo 2's over the projection with gpt-oss's sinks, none; each loads with what is reported.
    test('listAttentionModules reports q/k norms, their bias and sinks, which then load', async () => {
      const t = (...shape) => ({ shape, data: new Float32Array(shape.reduce((a, b) => a * b)).fill(0.5) });
      const layer = (i, extra) => Object.fromEntries(Object.entries({
        'q_proj.weight': t(8, 8), 'k_proj.weight': t(4, 8), 'v_proj.weight': t(4, 8),
        'o_proj.weight': t(8, 8), ...extra,
      }).map(([name, tensor]) => [`model.layers.${i}.self_attn.${name}`, tensor]));
      const bytes = writeSafetensors({
        ...layer(0, { 'q_norm.weight': t(4), 'k_norm.weight': t(4) }),
        ...layer(1, { 'q_norm.weight': t(2, 4), 'q_norm.bias': t(2, 4), 'k_norm.weight': t(1, 4),
          'k_norm.bias': t(1, 4) }),
        ...layer(2, { 'q_norm.weight': t(8), 'k_norm.weight': t(4), sinks: t(2) }),
        ...layer(3, {}),
      });
      const found = await lib.listAttentionModules(bytes);
      assert.deepEqual(found.map((m) => [m.prefix, m.layout, m.sinks, m.qkNorm]), [
        ['model.layers.0.self_attn.', 'qkv-linear', false, { over: 'head', bias: false }],
        ['model.layers.1.self_attn.', 'qkv-linear', false, { over: 'head-per-head', bias: true }],
        ['model.layers.2.self_attn.', 'qkv-linear', true, { over: 'all', bias: false }],
        ['model.layers.3.self_attn.', 'qkv-linear', false, null],
      ]);
      const options = [{ qkNorm: {} }, { qkNorm: { type: 'layer' } },
        { qkNorm: { over: 'all' }, sinks: true }, {}];
      for (const [i, m] of found.entries()) {
        const mha = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, numKVHeads: 1,
          bias: false, ...options[i] });
        await mha.loadSafetensors(bytes, { prefix: m.prefix });
        mha.dispose();
      }
    });

    test('only headers and the tensors used are copied into the heap', async () => {
      const fixture = layoutFixture('llama_no_bias');
      const mha = lib.createMultiheadAttention(layoutModuleConfig(fixture.config));
      const copied = [];
      const wasm = wasmOf(lib);
      const { allocate } = wasm;
      wasm.allocate = (bytes) => { copied.push(bytes); return allocate(bytes); };
      try {
        await mha.loadSafetensors(fixture.shards[0], weightOptions(fixture));
      } finally {
        wasm.allocate = allocate;
      }
      // The header, then layer 1's q, k, v and o weights (16 x 16 floats each).
      const shard = fixture.shards[0];
      const headerLength = Number(new DataView(shard.buffer, shard.byteOffset, 8).getBigUint64(0, true));
      assert.deepEqual(copied, [8 + headerLength, 1024, 1024, 1024, 1024]);
      mha.dispose();
    });
  });
}

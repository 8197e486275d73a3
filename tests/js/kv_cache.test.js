// KV caches through the JS API: getters, truncate/reset, every kind of bad
// decoding call (an MHAError naming the cache and the numbers, the cache left
// as it was, decoding then continuing exactly as without the error), and a
// step against the cache as the forward over the whole sequence computes it.
// On both WASM builds.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { assertClose } from './helpers/fixtures.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const CONFIG = { embedDim: 16, numHeads: 4, numKVHeads: 2, rotary: { dim: 4 } };
const tokens = randomTensor([8, 2, 16], 1);  // (L, N, E)
const rows = (begin, end) => ({
  data: tokens.data.subarray(begin * 32, end * 32), shape: [end - begin, 2, 16],
});

async function rejects(promise, pattern) {
  await assert.rejects(promise, (e) => e instanceof MHAError && pattern.test(e.message));
}

for (const build of BUILDS) {
  describe(`KV cache on ${build}`, () => {
    let lib;
    let mha;
    let cache;
    const step = (begin, end, options = {}) =>
      mha.forward(rows(begin, end), rows(begin, end), rows(begin, end),
        { cache, isCausal: true, needWeights: false, ...options });

    before(async () => {
      lib = await loadMHA({ build });
      mha = randomModule(lib, CONFIG, 3);
    });

    test('getters, and errors that leave the cache as it was', async () => {
      // bytes: 2 entries x 6 rows x 2 heads x (4 + 4) features x 2 bytes.
      for (const [dtype, bytes] of [['float32', 768], ['bfloat16', 384], ['float16', 384]]) {
        cache = mha.createKVCache({ batchSize: 2, maxLength: 6, dtype });
        assert.deepEqual([cache.length, cache.maxLength, cache.batchSize, cache.dtype, cache.bytes],
          [0, 6, 2, dtype, bytes]);
        if (dtype !== 'float16') cache.dispose();
      }
      const free = lib.createKVCache({ batchSize: 3, numKVHeads: 2, headDim: 4, vHeadDim: 5,
        maxLength: 7, dtype: 'bfloat16' });
      assert.equal(free.bytes, 3 * 7 * 2 * (4 + 5) * 2);
      free.dispose();
      assert.throws(() => free.bytes, /cache\.bytes: expected a live KVCache/);
      await step(0, 3);
      assert.equal(cache.length, 3);
      await rejects(step(3, 7), /cache: appending 4 keys to a cache holding 3 would exceed its max_length 6/);
      await rejects(mha.forward(rows(3, 4), null, null, { cache, keyPaddingMask:
        { data: new Uint8Array(2), shape: [2, 1] } }), /key_padding_mask: expected shape \(2, 3\)/);
      const one = randomTensor([1, 1, 16], 2);
      await rejects(mha.forward(one, one, one, { cache }), /cache .* batch size 2, but query has batch size 1/);
      const other = randomModule(lib, CONFIG, 4);
      await rejects(other.forward(rows(3, 4), rows(3, 4), rows(3, 4), { cache }),
        /cache \(batch_size 2, num_kv_heads 2, head_dim 4, v_head_dim 4, max_length 6, float16, holding 3\) belongs to another module/);
      other.dispose();
      await rejects(mha.forward(rows(3, 4), rows(3, 4), null, { cache }),
        /key, value: expected two tensors or both null/);
      await rejects(mha.forward(rows(3, 4), null, null),
        /^key, value: both null attends the keys of a cache only, and there is no cache: expected options\.cache, or two tensors$/);
      await rejects(cache.truncate(4), /truncate: expected a length in \[0, 3\]/);
      await rejects(cache.truncate(-1),
        /truncate: expected a length \(an integer >= 0\), received number -1/);
      assert.equal(cache.length, 3);
      // Decoding continues as on a cache that never saw the errors.
      const a = await step(3, 4);
      const errorsFree = cache;
      cache = mha.createKVCache({ batchSize: 2, maxLength: 6, dtype: 'float16' });
      await step(0, 3);
      assert.ok(sameBits(a, await step(3, 4)));
      errorsFree.dispose();
      cache.dispose();
    });

    test('truncate rolls back; reset empties; null key/value attend the cache only',
      async () => {
        cache = mha.createKVCache({ batchSize: 2, maxLength: 8 });
        await step(0, 4);
        const fourth = await step(4, 5);
        await step(5, 7);
        cache.truncate(4);
        assert.equal(cache.length, 4);
        assert.ok(sameBits(fourth, await step(4, 5)), 'the same step after truncation');
        const before = cache.length;
        await mha.forward(rows(6, 7), null, null, { cache });
        assert.equal(cache.length, before, 'nothing appended');
        cache.reset();
        assert.equal(cache.length, 0);
        await rejects(mha.forward(rows(0, 1), null, null, { cache }),
          /key: expected at least one key; the cache is empty/);
        cache.dispose();
      });

    test('disposed caches, foreign objects and caches of the other kind', async () => {
      cache = mha.createKVCache({ batchSize: 2, maxLength: 4 });
      cache.dispose();
      cache.dispose();  // twice is fine
      await rejects(step(0, 1),
        /cache: expected a live KVCache, received one that was disposed/);
      assert.throws(() => cache.length, /cache\.length: expected a live KVCache/);
      cache = {};
      await rejects(step(0, 1),
        /cache: expected a KVCache from createKVCache of this library, received an object/);
      cache = lib.createKVCache({ batchSize: 2, numKVHeads: 2, headDim: 4, maxLength: 4 });
      await rejects(step(0, 1), /cache .* was made by createKVCache for scaled_dot_product_attention/);
      const q = randomTensor([2, 4, 1, 4], 5);
      const k = randomTensor([2, 2, 1, 4], 6);
      const moduleCache = mha.createKVCache({ batchSize: 2, maxLength: 4 });
      await rejects(lib.scaledDotProductAttention(q, k, k, { cache: moduleCache, enableGqa: true }),
        /belongs to a MultiheadAttention module/);
      await rejects(lib.scaledDotProductAttention(q, k, k, { cache }),
        /key: expected shape \(2, 4, 1, 4\) \(query's batch dims and E\), got \(2, 2, 1, 4\)/);
      await rejects(lib.scaledDotProductAttention(q, null, null, { cache }),
        /without enable_gqa they must equal the cache's num_kv_heads/);
      await lib.scaledDotProductAttention(q, k, k, { cache, enableGqa: true });
      assert.equal(cache.length, 1);
      cache.dispose();
      moduleCache.dispose();
    });

    // The decode kernel's score tile steps through a head 4 features at a time, four steps per
    // loop iteration, each with its own exit: head dims of 1 to 5 steps leave after every one.
    test('a step against the cache agrees with the forward over the whole sequence, for head dims 4 to 20',
      async () => {
        const L = 41;  // 40 cached keys: two sub-blocks of the kernel, the second of odd length
        for (const headDim of [4, 8, 12, 16, 20]) {
          const E = 4 * headDim;
          const gqa = randomModule(lib, { embedDim: E, numHeads: 4, numKVHeads: 1 }, headDim);
          const x = randomTensor([L, 1, E], headDim);
          const full = (await gqa.forward(x, x, x, { isCausal: true, needWeights: false })).output;
          const rowsOf = (t, begin, end) =>
            ({ data: t.data.subarray(begin * E, end * E), shape: [end - begin, 1, E] });
          const withCache = gqa.createKVCache({ batchSize: 1, maxLength: L });
          const options = { cache: withCache, isCausal: true, needWeights: false };
          const past = rowsOf(x, 0, L - 1);
          await gqa.forward(past, past, past, options);
          const last = rowsOf(x, L - 1, L);
          const { output } = await gqa.forward(last, last, last, options);
          assertClose(output, rowsOf(full, L - 1, L), `head dim ${headDim}`);
          withCache.dispose();
          gqa.dispose();
        }
      });

    test('bad options and configs', () => {
      const withBiasKV = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, addBiasKV: true });
      assert.throws(() => withBiasKV.createKVCache({ batchSize: 1, maxLength: 4 }),
        /cache: a module with add_bias_kv or add_zero_attn cannot decode with a cache/);
      withBiasKV.dispose();
      assert.throws(() => mha.createKVCache({ batchSize: 1, maxLength: 4, dtype: 'float64' }),
        /dtype: expected 'float32', 'float16' or 'bfloat16', received the string 'float64'/);
      assert.throws(() => mha.createKVCache({ batchSize: 1, maxLength: 0 }),
        /maxLength: expected a positive integer, received number 0/);
      assert.throws(() => mha.createKVCache({ batchSize: 1 }), /maxLength/);
      assert.throws(() => lib.createKVCache({ batchSize: 1, maxLength: 4, headDim: 4 }),
        /numKVHeads: expected a positive integer, received undefined/);
      assert.throws(() => lib.createMultiheadAttention({ embedDim: 8, numHeads: 4, numKVHeads: 3 }),
        /num_kv_heads: expected a divisor of num_heads \(4\)/);
      assert.throws(() => lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, rotary: { dim: 3 } }),
        /rotary\.dim: expected an even number of features <= qk_head_dim \(4\), got 3/);
      assert.throws(() => lib.createMultiheadAttention({ embedDim: 8, numHeads: 2, rotary: { base: -2 } }),
        /rotary\.base: expected a positive finite number, received number -2/);
    });
  });
}

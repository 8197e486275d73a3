// Caches an app keeps (docs/design.md, "Caches an app keeps: save, restore, fork, grow,
// stream") through the JS API, on every WASM build: a cache saved at step k and loaded by a
// fresh module of a fresh library, a clone, a selection and a resized cache each continue bit
// for bit as one uninterrupted run; float32, float16 and bfloat16, rolling and not, module and
// functional caches; bad bytes reject naming what differs. (Through the proxy: the contract
// table, tests/js/helpers/contract_table.js.)
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS, separateLibrary } from './helpers/builds.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const E = 16;
const config = (rolling) => ({ embedDim: E, numHeads: 4, numKVHeads: 2, batchFirst: true,
  rotary: { base: 10000 }, ...(rolling ? { window: [3, 0] } : {}) });
const token = (batch, seed, length = 1) => randomTensor([batch, length, E], seed);

// The results of steps seeds first..last (one token per entry each) on `cache`.
async function steps(mha, cache, batch, first, last) {
  const outputs = [];
  for (let seed = first; seed <= last; seed++) {
    const x = token(batch, seed);
    outputs.push(await mha.forward(x, x, x, { cache, isCausal: true, needWeights: false }));
  }
  return outputs;
}

const assertSameRuns = (a, b, what) =>
  a.forEach((output, i) => assert.ok(sameBits(output, b[i]), `${what}: step ${i} differs`));

async function rejects(promise, pattern) {
  await assert.rejects(promise, (e) => e instanceof MHAError && pattern.test(e.message),
    `expected an MHAError matching ${pattern}`);
}

const CASES = ['float32', 'float16', 'bfloat16'].flatMap((dtype) =>
  [false, true].map((rolling) => ({ dtype, rolling })));

for (const build of BUILDS) {
  describe(`caches an app keeps on ${build}`, () => {
    for (const { dtype, rolling } of CASES) {
      test(`${dtype}${rolling ? ' rolling' : ''}: save at step 4, load in a fresh library, continue`, async () => {
        const lib = await loadMHA({ build });
        const mha = randomModule(lib, config(rolling), 5);
        const cache = mha.createKVCache({ batchSize: 2, maxLength: rolling ? 6 : 20, dtype, rolling });
        const prompt = token(2, 1, 3);
        await mha.forward(prompt, prompt, prompt, { cache, isCausal: true, needWeights: false });
        await steps(mha, cache, 2, 2, 4);
        const bytes = await cache.save();
        assert.ok(bytes instanceof Uint8Array);
        const uninterrupted = await steps(mha, cache, 2, 5, 12);   // a rolling ring wraps

        const fresh = await separateLibrary(build);
        const again = randomModule(fresh, config(rolling), 5);
        const loaded = await again.loadKVCache(bytes);
        assert.deepEqual([loaded.length, loaded.held, loaded.maxLength, loaded.batchSize, loaded.dtype,
          loaded.rolling, loaded.bytes], [6, 6, rolling ? 6 : 20, 2, dtype, rolling, cache.bytes]);
        assert.deepEqual(await loaded.save(), bytes);
        assertSameRuns(await steps(again, loaded, 2, 5, 12), uninterrupted, 'loaded');
        for (const object of [cache, loaded, mha, again]) object.dispose();
      });
    }

    test('functional caches: lib.loadKVCache continues scaledDotProductAttention bit for bit', async () => {
      const lib = await loadMHA({ build });
      const cache = lib.createKVCache({ batchSize: 1, numKVHeads: 2, headDim: 4, maxLength: 12,
        dtype: 'float16' });
      const step = (on, seed) => on.scaledDotProductAttention(randomTensor([1, 4, 1, 4], seed),
        randomTensor([1, 2, 1, 4], seed + 50), randomTensor([1, 2, 1, 4], seed + 100),
        { cache: on === lib ? cache : loaded, enableGqa: true });
      let loaded = null;
      for (let seed = 1; seed <= 4; seed++) await step(lib, seed);
      const fresh = await separateLibrary(build);
      assert.notEqual(fresh, lib);
      loaded = await fresh.loadKVCache((await cache.save()).buffer);   // an ArrayBuffer too
      assert.deepEqual([loaded.length, loaded.maxLength, loaded.dtype], [4, 12, 'float16']);
      for (let seed = 5; seed <= 8; seed++) {
        assert.ok(sameBits({ output: await step(lib, seed) }, { output: await step(fresh, seed) }),
          `step ${seed}`);
      }
      cache.dispose();
      loaded.dispose();
    });

    test('bad bytes reject naming what differs; the module stays usable', async () => {
      const lib = await loadMHA({ build });
      const mha = randomModule(lib, config(false), 5);
      const cache = mha.createKVCache({ batchSize: 1, maxLength: 8, dtype: 'bfloat16' });
      const x = token(1, 1, 3);
      await mha.forward(x, x, x, { cache, isCausal: true, needWeights: false });
      const bytes = await cache.save();
      assert.equal(bytes.length, 88 + 8 + 3 * 2 * (4 + 4) * 2);  // 8: one entry's padding
      await rejects(mha.loadKVCache('cache'), /^loadKVCache: bytes: expected a Uint8Array \(or ArrayBuffer\) from cache\.save\(\), received the string 'cache'$/);
      await rejects(mha.loadKVCache(bytes.subarray(0, 50)), /^loadKVCache: bytes: expected a saved KVCache \(at least 96 bytes\), got 50 bytes \(truncated\?\)/);
      await rejects(mha.loadKVCache(bytes.subarray(0, bytes.length - 1)),
        new RegExp(`^loadKVCache: bytes: expected ${bytes.length} bytes .*bfloat16, held 3\\), got ${bytes.length - 1} \\(truncated\\); nothing was loaded$`));
      const changed = (offset, value) => {
        const copy = bytes.slice();
        copy[offset] = value ?? copy[offset] ^ 1;
        return copy;
      };
      await rejects(mha.loadKVCache(changed(0, 0)), /not a saved KVCache/);
      await rejects(mha.loadKVCache(changed(8, 7)), /^loadKVCache: bytes: format version 7; this version of mha-wasm reads version 2/);
      await rejects(mha.loadKVCache(changed(32)), /header's checksum \(CRC-32\) does not match: the bytes are corrupted/);
      await rejects(mha.loadKVCache(changed(90)), /keys' and values' checksum \(CRC-32\) does not match/);
      const other = randomModule(lib, { ...config(false), numKVHeads: 4 }, 6);
      await rejects(other.loadKVCache(bytes), /^loadKVCache: bytes: the saved cache's heads differ from this module's caches: num_kv_heads 2 \(this module's: 4\); nothing was loaded$/);
      const free = lib.createKVCache({ batchSize: 1, numKVHeads: 2, headDim: 4, maxLength: 8, rolling: true });
      await rejects(mha.loadKVCache(await free.save()), /^loadKVCache: cache: rolling needs a module with a finite left window/);
      // Still usable: the same bytes load and continue.
      const loaded = await mha.loadKVCache(bytes);
      assertSameRuns(await steps(mha, loaded, 1, 9, 10), await steps(mha, cache, 1, 9, 10), 'after errors');
      for (const object of [cache, loaded, free, other, mha]) object.dispose();
      await rejects(cache.save(), /^save: expected a live KVCache, received one that was disposed$/);
    });

    for (const { dtype, rolling } of CASES) {
      test(`${dtype}${rolling ? ' rolling' : ''}: clone and select continue as separate runs`, async () => {
        const lib = await loadMHA({ build });
        const mha = randomModule(lib, config(rolling), 7);
        const options = { batchSize: 1, maxLength: rolling ? 6 : 16, dtype, rolling };
        const one = mha.createKVCache(options);
        const prompt = token(1, 1, 3);
        await mha.forward(prompt, prompt, prompt, { cache: one, isCausal: true, needWeights: false });
        await steps(mha, one, 1, 2, 4);
        const beams = await one.select(Int32Array.of(0, 0, 0, 0));
        const clone = await one.clone();
        assert.deepEqual([beams.batchSize, beams.length, beams.maxLength, clone.batchSize, clone.length],
          [4, one.length, one.maxLength, 1, one.length]);
        // Each beam holds the prompt's cache, bit for bit; and decodes as its own copy of it does
        // (to rounding: a batch of 4 projects through another GEMM path than a batch of 1).
        const entry = async (cache, b) => {
          const selected = await cache.select(Int32Array.of(b));
          const bytes = await selected.save();
          selected.dispose();
          return bytes;
        };
        const alone = await one.save();
        for (let b = 0; b < 4; b++) assert.deepEqual(await entry(beams, b), alone, `beam ${b}`);
        const beamRuns = await steps(mha, beams, 4, 20, 22);
        for (let b = 0; b < 4; b++) {
          const own = await one.clone();
          assert.deepEqual(await own.save(), alone);
          for (let seed = 20; seed <= 22; seed++) {
            const x = token(4, seed);
            const row = { data: x.data.subarray(b * E, (b + 1) * E), shape: [1, 1, E] };
            const { output } = await mha.forward(row, row, row, { cache: own, isCausal: true, needWeights: false });
            const together = beamRuns[seed - 20].output.data.subarray(b * E, (b + 1) * E);
            output.data.forEach((v, i) => assert.ok(Math.abs(v - together[i]) <= 1e-5 * (1 + Math.abs(v)),
              `beam ${b}, step ${seed}, feature ${i}: ${v} alone, ${together[i]} in the batch`));
          }
          own.dispose();
        }
        // The clone and the original, each continued, as one run each.
        const cloneRun = await steps(mha, clone, 1, 30, 33);
        assertSameRuns(await steps(mha, one, 1, 30, 33), cloneRun, 'clone and original');
        // Beams reordered: select [2, 0] holds entries 2 and 0, bit for bit.
        const picked = await beams.select(Int32Array.of(2, 0));
        assert.deepEqual(await entry(picked, 0), await entry(beams, 2));
        assert.deepEqual(await entry(picked, 1), await entry(beams, 0));
        assert.notDeepEqual(await entry(beams, 2), await entry(beams, 0));
        await rejects(beams.select(Int32Array.of(0, 4)), /^select: indices\[1\]: expected an index in \[0, 4\) \(the cache's batch_size\), got 4$/);
        await rejects(beams.select([0]), /^select: indices: expected an Int32Array of at least one entry/);
        await rejects(beams.select(new Int32Array(0)), /^select: indices: expected an Int32Array of at least one entry/);
        for (const object of [one, beams, clone, picked, mha]) object.dispose();
      });
    }

    for (const { dtype, rolling } of CASES) {
      test(`${dtype}${rolling ? ' rolling' : ''}: resize grows in place, as a cache made larger`, async () => {
        const lib = await loadMHA({ build });
        const mha = randomModule(lib, config(rolling), 9);
        const large = mha.createKVCache({ batchSize: 2, maxLength: 24, dtype, rolling });
        const cache = mha.createKVCache({ batchSize: 2, maxLength: 6, dtype, rolling });
        for (const each of [large, cache]) {
          const prompt = token(2, 1, 3);
          await mha.forward(prompt, prompt, prompt, { cache: each, isCausal: true, needWeights: false });
          await steps(mha, each, 2, 2, rolling ? 6 : 4);
        }
        if (!rolling) {
          await rejects(steps(mha, cache, 2, 5, 5), /^forward: cache: appending 1 keys to a cache holding 6 would exceed its max_length 6; the cache is left as it was \(resize it to a larger max_length, or make a rolling cache for a model with a window\)$/);
        }
        await rejects(cache.resize(5), /^resize: expected a max_length >= 6 \(the keys the cache holds per entry; truncate first to hold fewer\), got 5; the cache is left as it was$/);
        await rejects(cache.resize(0), /^resize: maxLength: expected a positive integer, received number 0$/);
        const bytes = cache.bytes;
        await cache.resize(24);
        assert.deepEqual([cache.maxLength, cache.bytes, cache.length], [24, bytes * 4, rolling ? 8 : 6]);
        assertSameRuns(await steps(mha, cache, 2, 10, 26), await steps(mha, large, 2, 10, 26), 'resized');
        for (const object of [large, cache, mha]) object.dispose();
      });
    }
  });
}

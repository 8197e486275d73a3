// StreamingLLM caches (docs/design.md, "Caches an app keeps") through the JS API, on every WASM
// build: their results against Hugging Face's SinkCache are the generation fixtures'
// (streaming_*, decoding_fixtures.test.js); here bad `keep`, the functional form's refusal, an
// oversized call that leaves the cache as it was, and save/load and clone continuing bit for bit.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS, separateLibrary } from './helpers/builds.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const E = 16;
const CONFIG = { embedDim: E, numHeads: 4, numKVHeads: 2, batchFirst: true,
  rotary: { base: 10000 } };

async function steps(mha, cache, first, last, L = 1) {
  const outputs = [];
  for (let seed = first; seed <= last; seed++) {
    const x = randomTensor([2, L, E], seed);
    outputs.push(await mha.forward(x, x, x, { cache, isCausal: true, needWeights: false }));
  }
  return outputs;
}

const assertSameRuns = (a, b, what) =>
  a.forEach((output, i) => assert.ok(sameBits(output, b[i]), `${what}: step ${i} differs`));

const throwsMHA = (f, pattern) =>
  assert.throws(f, (e) => e instanceof MHAError && pattern.test(e.message), `expected ${pattern}`);

for (const build of BUILDS) {
  describe(`StreamingLLM caches on ${build}`, () => {
    test('a bad keep, and keep on the functional form, throw naming it', async () => {
      const lib = await loadMHA({ build });
      const mha = randomModule(lib, CONFIG, 3);
      for (const keep of [-1, 8, 2.5, '2', undefined]) {
        throwsMHA(() => mha.createKVCache({ batchSize: 2, maxLength: 8, rolling: { keep } }),
          /rolling\.keep: expected an integer in \[0, max(Length|_length) - 1\] = \[0, 7\] \(the keys kept as sinks\), (received|got) /);
      }
      throwsMHA(() => mha.createKVCache({ batchSize: 2, maxLength: 8, rolling: { keep: 1, sinks: 2 } }),
        /rolling: unknown option .sinks./);
      throwsMHA(() => lib.createKVCache({ batchSize: 1, numKVHeads: 2, headDim: 4, maxLength: 8,
        rolling: { keep: 2 } }), /rolling\.keep: a StreamingLLM cache is a module's/);
      const cache = mha.createKVCache({ batchSize: 2, maxLength: 8, rolling: { keep: 2 } });
      assert.deepEqual(cache.rolling, { keep: 2 });
      await steps(mha, cache, 1, 1, 7);
      await steps(mha, cache, 2, 2, 3);               // drops 2
      assert.equal(cache.length, 8);
      await assert.rejects(steps(mha, cache, 3, 3, 7),
        /appending 7 keys; a StreamingLLM cache makes room for at most max_length - keep = 6 keys a call; the cache is left as it was/);
      assert.equal(cache.length, 8);
      cache.dispose();
      mha.dispose();
    });

    test('saved, loaded and cloned at a full cache, it continues bit for bit', async () => {
      const lib = await loadMHA({ build });
      for (const dtype of ['float32', 'bfloat16']) {
        const mha = randomModule(lib, CONFIG, 4);
        const cache = mha.createKVCache({ batchSize: 2, maxLength: 6, dtype, rolling: { keep: 3 } });
        await steps(mha, cache, 1, 1, 4);
        await steps(mha, cache, 2, 5);                // past maxLength
        const bytes = await cache.save();
        const fresh = await separateLibrary(build);   // another library
        const other = randomModule(fresh, CONFIG, 4);
        const loaded = await other.loadKVCache(bytes);
        const copy = await cache.clone();
        assert.deepEqual(loaded.rolling, { keep: 3 });
        assert.deepEqual(copy.rolling, { keep: 3 });
        const uninterrupted = await steps(mha, cache, 6, 12);
        assertSameRuns(await steps(other, loaded, 6, 12), uninterrupted, `${dtype} loaded`);
        assertSameRuns(await steps(mha, copy, 6, 12), uninterrupted, `${dtype} clone`);
        await assert.rejects(fresh.loadKVCache(bytes), /a StreamingLLM cache is a module's/);
        for (const x of [cache, loaded, copy, mha, other]) x.dispose();
      }
    });
  });
}

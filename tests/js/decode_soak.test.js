// Soak: 10,000 decode steps (a grouped-query, rotary module on float32 and
// float16 caches, the float16 one with default options, so weights too, and
// the functional form on its own cache) leave the WASM heap exactly where it
// was after a warm-up: a cache takes what its maxLength says, once, and
// nothing grows per step. And a float16 cache is never copied whole to
// float32, whatever the call's shape.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomModule, randomTensor } from './helpers/random.js';

const STEPS = 10000;
const WARMUP = 1000;
const MAX_LENGTH = 128;

// One decode step per call; a cache that fills up rolls back to its prompt.
function makeDecoders(lib) {
  const mha = randomModule(lib, { embedDim: 32, numHeads: 4, numKVHeads: 2,
    rotary: { dim: 8 } }, 11);
  const prompt = randomTensor([16, 1, 32], 12);
  const token = randomTensor([1, 1, 32], 13);
  // float32: the decode kernel; float16 with default options (needWeights
  // true): the weights path, reading the float16 keys tile by tile.
  const decoders = [['float32', { needWeights: false }], ['float16', {}]].map(([dtype, options]) => {
    const cache = mha.createKVCache({ batchSize: 1, maxLength: MAX_LENGTH, dtype });
    return async () => {
      if (cache.length === 0 || cache.length === MAX_LENGTH) {
        await cache.reset();
        await mha.forward(prompt, prompt, prompt, { ...options, cache, isCausal: true });
      }
      return (await mha.forward(token, token, token, { ...options, cache })).output;
    };
  });
  const sdpaCache = lib.createKVCache({ batchSize: 1, numKVHeads: 2, headDim: 8,
    maxLength: MAX_LENGTH });
  const q = randomTensor([1, 4, 1, 8], 14);
  const kv = randomTensor([1, 2, 1, 8], 15);
  decoders.push(async () => {
    if (sdpaCache.length === MAX_LENGTH) await sdpaCache.truncate(1);
    return lib.scaledDotProductAttention(q, kv, kv, { cache: sdpaCache, enableGqa: true });
  });
  return decoders;
}

for (const build of BUILDS) {
  describe(`decode soak on ${build}`, () => {
    test(`${STEPS} decode steps: heap unchanged`, async () => {
      const lib = await loadMHA({ build });
      const decoders = makeDecoders(lib);
      for (let i = 0; i < WARMUP; ++i) await decoders[i % decoders.length]();
      const warm = await lib.heapInfo();
      let finite = 0;
      for (let i = 0; i < STEPS; ++i) {
        const output = await decoders[i % decoders.length]();
        if (output.data.every(Number.isFinite)) ++finite;
      }
      const end = await lib.heapInfo();
      assert.equal(finite, STEPS, 'every output finite');
      assert.equal(end.memoryBytes, warm.memoryBytes, 'WASM memory size unchanged');
      assert.equal(end.heapTop, warm.heapTop, 'heap top (sbrk) unchanged');
      assert.equal(end.inUseBytes, warm.inUseBytes, 'malloc bytes in use unchanged');
    });

    test('a float16 cache filled by chunks and read with weights: no float32 copy of it', async () => {
      const lib = await loadMHA({ build });
      const E = 64, maxLength = 2048, rows = 256;
      const cacheBytes = 2 * maxLength * E * 2;  // keys and values, 2 bytes each
      const mha = randomModule(lib, { embedDim: E, numHeads: 4 }, 21);
      const cache = mha.createKVCache({ batchSize: 1, maxLength, dtype: 'float16' });
      const chunk = randomTensor([rows, 1, E], 22);
      const token = randomTensor([1, 1, E], 23);
      // Every call shape once while the cache is short: their own buffers.
      await mha.forward(chunk, chunk, chunk, { cache, needWeights: false });
      await mha.forward(token, token, token, { cache });
      const before = await lib.heapInfo();
      // More than 16 query rows (the flash kernel), then a step with weights.
      while (cache.length + rows < maxLength) {
        await mha.forward(chunk, chunk, chunk, { cache, needWeights: false });
      }
      const { weights } = await mha.forward(token, token, token, { cache });
      assert.equal(weights.shape.at(-1), cache.length);
      const after = await lib.heapInfo();
      // The step's weights grow with the keys (4 heads x T floats, and their
      // average); a float32 copy of the cache would be twice the cache.
      const grown = after.inUseBytes - before.inUseBytes;
      assert.ok(grown < cacheBytes / 4, `heap grew ${grown} bytes; the cache holds ${cacheBytes}`);
    });
  });
}

// Soak: 10,000 decode steps (a grouped-query, rotary module on float32 and
// float16 caches, and the functional form on its own cache) leave the WASM
// heap exactly where it was after a warm-up: a cache takes what its
// maxLength says, once, and nothing grows per step.
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
  const decoders = ['float32', 'float16'].map((dtype) => {
    const cache = mha.createKVCache({ batchSize: 1, maxLength: MAX_LENGTH, dtype });
    return async () => {
      if (cache.length === 0 || cache.length === MAX_LENGTH) {
        await cache.reset();
        await mha.forward(prompt, prompt, prompt, { cache, isCausal: true, needWeights: false });
      }
      return (await mha.forward(token, token, token, { cache, needWeights: false })).output;
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
  });
}

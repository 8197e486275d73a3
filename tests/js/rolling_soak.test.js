// Soak: a rolling cache (a window of 16 in a ring of 17) generates 100,000 positions, far past
// its maxLength, one step per call: length counts every position, held stays at maxLength, and
// the WASM heap stays exactly where it was after a warm-up (memory is what maxLength says for
// any length of generation). On the default build: the other builds run the same core (their
// rolling results are checked in generation.test.js and decoding_fixtures.test.js).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { randomModule, randomTensor } from './helpers/random.js';

const POSITIONS = 100000;
const WARMUP = 1000;

test(`a rolling cache over ${POSITIONS} positions: heap unchanged`, async () => {
  const lib = await loadMHA();
  const mha = randomModule(lib, { embedDim: 8, numHeads: 2, rotary: { dim: 4 }, window: 16 }, 3);
  const cache = mha.createKVCache({ batchSize: 1, maxLength: 17, rolling: true });
  const token = randomTensor([1, 1, 8], 4);
  const options = { cache, isCausal: true, needWeights: false };
  for (let i = 0; i < WARMUP; ++i) await mha.forward(token, token, token, options);
  const warm = await lib.heapInfo();
  let finite = 0;
  for (let i = 0; i < POSITIONS; ++i) {
    const { output } = await mha.forward(token, token, token, options);
    if (output.data.every(Number.isFinite)) ++finite;
  }
  const end = await lib.heapInfo();
  assert.equal(finite, POSITIONS, 'every output finite');
  assert.equal(cache.length, WARMUP + POSITIONS);
  assert.equal(cache.held, 17);
  assert.equal(end.memoryBytes, warm.memoryBytes, 'WASM memory size unchanged');
  assert.equal(end.heapTop, warm.heapTop, 'heap top (sbrk) unchanged');
  assert.equal(end.inUseBytes, warm.inUseBytes, 'malloc bytes in use unchanged');
  cache.dispose();
  mha.dispose();
});

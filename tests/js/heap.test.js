// Steady state: 2,000 forwards do not grow the WASM heap after the first few
// (inputs and outputs are copied once and every block is freed).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';

const WARMUP = 10;
const FORWARDS = 2000;

// Deterministic pseudo-random floats in [-1, 1).
function randomTensor(shape, seed) {
  let state = seed;
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map(() => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 31 - 1;
  });
  return { data, shape };
}

for (const build of BUILDS) {
  describe(`heap on ${build}`, () => {
    test(`${FORWARDS} forwards leave the heap where it was after ${WARMUP}`, async () => {
      const lib = await loadMHA({ build });
      const mha = lib.createMultiheadAttention({ embedDim: 64, numHeads: 4 });
      const stateDict = {};
      mha.parameters.forEach(({ name, shape }, i) => {
        stateDict[name] = randomTensor(shape, i + 1).data;
      });
      mha.loadStateDict(stateDict);
      const query = randomTensor([33, 2, 64], 11);
      const key = randomTensor([40, 2, 64], 12);
      const keyPaddingMask = { data: new Uint8Array(2 * 40).map((_, i) => i % 7 === 3), shape: [2, 40] };
      // Alternate the weights and flash paths, self- and cross-attention.
      const step = (i) => (i % 2 === 0
        ? mha.forward(query, query, query, { isCausal: true })
        : mha.forward(query, key, key, { keyPaddingMask, needWeights: false }));

      for (let i = 0; i < WARMUP; ++i) await step(i);
      const settled = lib.heapInfo();
      let last;
      for (let i = 0; i < FORWARDS; ++i) last = await step(i);
      const end = lib.heapInfo();

      assert.equal(last.output.data.length, 33 * 2 * 64);
      assert.ok(last.output.data.every(Number.isFinite), 'outputs are finite');
      assert.equal(end.heapTop, settled.heapTop, 'heap top (sbrk) unchanged');
      assert.equal(end.memoryBytes, settled.memoryBytes, 'WASM memory size unchanged');
      assert.equal(end.inUseBytes, settled.inUseBytes, 'malloc bytes in use unchanged');
      mha.dispose();
    });
  });
}

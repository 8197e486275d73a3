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
      const settled = await lib.heapInfo();
      let last;
      for (let i = 0; i < FORWARDS; ++i) last = await step(i);
      const end = await lib.heapInfo();

      assert.equal(last.output.data.length, 33 * 2 * 64);
      assert.ok(last.output.data.every(Number.isFinite), 'outputs are finite');
      assert.equal(end.heapTop, settled.heapTop, 'heap top (sbrk) unchanged');
      assert.equal(end.memoryBytes, settled.memoryBytes, 'WASM memory size unchanged');
      assert.equal(end.inUseBytes, settled.inUseBytes, 'malloc bytes in use unchanged');
      mha.dispose();
    });

    test('a forward that grows the WASM memory returns correct results', async () => {
      const lib = await loadMHA({ build });
      const mha = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2 });
      const stateDict = {};
      mha.parameters.forEach(({ name, shape }, i) => {
        stateDict[name] = randomTensor(shape, i + 1).data;
      });
      mha.loadStateDict(stateDict);
      const L = 1500;   // weights alone: L * L floats, more than the initial 16 MiB
      const x = randomTensor([L, 8], 7);
      const before = (await lib.heapInfo()).memoryBytes;
      const { output, weights } = await mha.forward(x, x, x);
      assert.ok((await lib.heapInfo()).memoryBytes > before, 'memory grew');
      assert.deepEqual(weights.shape, [L, L]);
      assert.ok(output.data.every(Number.isFinite), 'outputs are finite');
      for (const row of [0, L >> 1, L - 1]) {
        const sum = weights.data.subarray(row * L, (row + 1) * L).reduce((a, b) => a + b, 0);
        assert.ok(Math.abs(sum - 1) < 1e-4, `weights row ${row} sums to ${sum}`);
      }
      mha.dispose();
    });
  });
}

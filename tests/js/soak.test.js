// Soak: 10,000 forwards of mixed shapes (weights and flash paths, masks,
// self- and cross-attention, SDPA) leave the WASM heap exactly where it was
// after a warm-up and the process RSS within a bound: nothing leaks or
// fragments per call.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomModule, randomTensor } from './helpers/random.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

const FORWARDS = 10000;
const WARMUP = 2000;
// V8 sizes its heaps in steps of tens of MiB after collections; leaking even
// one small result per call (10,000 x >= 6 KiB) would exceed this.
const RSS_BOUND = 48 * 2 ** 20;

// Eight call shapes: (L, S) from 1 to 48, masks of both dtypes, both paths.
function makeCalls(lib) {
  const mha = randomModule(lib, { embedDim: 32, numHeads: 4 }, 7);
  const calls = [];
  [[1, 1], [48, 48], [7, 30], [30, 7], [16, 16], [3, 45], [33, 2], [12, 40]].forEach(([L, S], i) => {
    const q = randomTensor([L, 2, 32], 100 + i);
    const kv = randomTensor([S, 2, 32], 200 + i);
    const kpm = { data: new Uint8Array(2 * S).map((_, j) => (j % 4 === 3 ? 1 : 0)), shape: [2, S] };
    const attnMask = { data: randomTensor([L, S], 300 + i).data, shape: [L, S] };
    const options = [{ keyPaddingMask: kpm }, { attnMask, needWeights: false },
      { isCausal: true, averageAttnWeights: false }, {}][i % 4];
    calls.push(() => mha.forward(q, L === S ? q : kv, L === S ? q : kv, options));
    const sq = randomTensor([2, 4, L, 8], 400 + i);
    const sk = randomTensor([2, 4, S, 8], 500 + i);
    calls.push(() => lib.scaledDotProductAttention(sq, sk, sk, { isCausal: i % 2 === 0 }));
  });
  return calls;
}

async function measure(lib) {
  gc();
  return { ...(await lib.heapInfo()), rss: process.memoryUsage().rss };
}

for (const build of BUILDS) {
  describe(`soak on ${build}`, () => {
    test(`${FORWARDS} forwards of mixed shapes: heap unchanged, RSS bounded`, async () => {
      const lib = await loadMHA({ build });
      const calls = makeCalls(lib);
      for (let i = 0; i < WARMUP; ++i) await calls[i % calls.length]();
      const warm = await measure(lib);
      let finite = 0;
      for (let i = 0; i < FORWARDS; ++i) {
        const result = await calls[i % calls.length]();
        const output = result.output ?? result;
        if (output.data.every(Number.isFinite)) ++finite;
      }
      const end = await measure(lib);
      assert.equal(finite, FORWARDS, 'every output finite');
      assert.equal(end.memoryBytes, warm.memoryBytes, 'WASM memory size unchanged');
      assert.equal(end.heapTop, warm.heapTop, 'heap top (sbrk) unchanged');
      assert.equal(end.inUseBytes, warm.inUseBytes, 'malloc bytes in use unchanged');
      assert.ok(end.rss - warm.rss < RSS_BOUND,
        `RSS grew by ${((end.rss - warm.rss) / 2 ** 20).toFixed(1)} MiB (bound ${RSS_BOUND / 2 ** 20} MiB)`);
    });
  });
}

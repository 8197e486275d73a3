// cache.reorder (beam search) through the JS API, on every WASM build: beams that decode with
// reorders between steps (a beam copied, another dropped, swaps, a cycle) give the rows of one
// causal forward per beam over its reordered sequence; a wrong array type or length and an index
// out of range reject and leave the cache as it was; 1,000 reorders allocate
// nothing. (PyTorch's beam searches, Hugging Face's index_select on past_key_values, run in
// decoding_fixtures.test.js: tests/fixtures/decoding/beam_*.)
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { wasmOf } from '../../web/src/library.js';
import { BUILDS } from './helpers/builds.js';
import { assertClose } from './helpers/fixtures.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const E = 16, BEAMS = 4, PROMPT = 5;
const CONFIG = { embedDim: E, numHeads: 4, numKVHeads: 2, rotary: { dim: 4 } };
const REORDERS = [[1, 1, 3, 0], [3, 2, 1, 0], [1, 2, 3, 0], [2, 2, 2, 2], [0, 0, 1, 1], [0, 1, 2, 3]];
const OPTIONS = { isCausal: true, needWeights: false };

// (L, N, E) seq-first from one (L * E) sequence per batch entry.
function batch(sequences, length) {
  const data = new Float32Array(length * sequences.length * E);
  sequences.forEach((s, n) => {
    for (let t = 0; t < length; t++) data.set(s.subarray(t * E, (t + 1) * E), (t * sequences.length + n) * E);
  });
  return { data, shape: [length, sequences.length, E] };
}

const concat = (a, b) => {
  const out = new Float32Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
};

async function rejects(promise, pattern) {
  await assert.rejects(promise, (e) => e instanceof MHAError && pattern.test(e.message));
}

for (const build of BUILDS) {
  describe(`cache.reorder on ${build}`, () => {
    let lib;
    let mha;
    before(async () => {
      lib = await loadMHA({ build });
      mha = randomModule(lib, CONFIG, 7);
    });

    for (const dtype of ['float32', 'float16']) {
      test(`${dtype}: each step equals one causal forward per beam over its reordered sequence`, async () => {
        const cache = mha.createKVCache({ batchSize: BEAMS, maxLength: PROMPT + REORDERS.length, dtype });
        let beams = [0, 1, 2, 3].map((b) => randomTensor([PROMPT * E], 10 + b).data);
        const prompts = batch(beams, PROMPT);
        await mha.forward(prompts, prompts, prompts, { cache, ...OPTIONS });
        for (const [step, indices] of REORDERS.entries()) {
          // Not awaited: calls run in order.
          const reordered = cache.reorder(Int32Array.from(indices));
          beams = indices.map((b) => beams[b]);
          const tokens = randomTensor([BEAMS * E], 20 + step).data;
          beams = beams.map((s, b) => concat(s, tokens.subarray(b * E, (b + 1) * E)));
          const x = { data: tokens, shape: [1, BEAMS, E] };
          const { output } = await mha.forward(x, x, x, { cache, ...OPTIONS });
          assert.equal(await reordered, undefined);
          for (const [b, sequence] of beams.entries()) {
            const T = sequence.length / E;
            const full = { data: sequence, shape: [T, 1, E] };
            // float16: the forward's keys rounded the same way, in a cache of its own.
            const own = dtype === 'float16' ? mha.createKVCache({ batchSize: 1, maxLength: T, dtype }) : null;
            const expected = (await mha.forward(full, full, full, { ...OPTIONS, cache: own })).output;
            own?.dispose();
            assertClose({ data: output.data.subarray(b * E, (b + 1) * E), shape: [E] },
              { data: expected.data.subarray((T - 1) * E), shape: [E] }, `step ${step}, beam ${b}`);
          }
        }
        assert.equal(cache.length, PROMPT + REORDERS.length);
        cache.dispose();
      });
    }

    test('a wrong array or an index out of range rejects and changes nothing', async () => {
      const twins = [0, 1].map(() => mha.createKVCache({ batchSize: 2, maxLength: 4 }));
      const x = randomTensor([2, 2, E], 3);
      for (const cache of twins) await mha.forward(x, x, x, { cache, ...OPTIONS });
      const [cache, twin] = twins;
      await rejects(cache.reorder([1, 0]),
        /reorder: indices: expected an Int32Array of batchSize \(2\) entries, received an Array of length 2/);
      await rejects(cache.reorder(new Uint32Array(2)), /reorder: indices: expected an Int32Array/);
      await rejects(cache.reorder(new Int32Array(3)),
        /reorder: indices: expected batchSize \(2\) entries, received 3/);
      await rejects(cache.reorder(Int32Array.of(1, 2)),
        /^reorder: indices\[1\]: expected an index in \[0, 2\) \(the cache's batch_size\), got 2; the cache is left as it was$/);
      await rejects(cache.reorder(Int32Array.of(-1, 0)), /reorder: indices\[0\]: .* got -1/);
      assert.equal(cache.length, 2);
      const y = randomTensor([1, 2, E], 4);
      assert.ok(sameBits(await mha.forward(y, y, y, { cache, ...OPTIONS }),
        await mha.forward(y, y, y, { cache: twin, ...OPTIONS })), 'as if no reorder was asked');
      twin.dispose();
      cache.dispose();
      await rejects(cache.reorder(Int32Array.of(0, 1)),
        /reorder: expected a live KVCache, received one that was disposed/);
    });

    test("the functional form's caches reorder too", async () => {
      const cache = lib.createKVCache({ batchSize: 2, numKVHeads: 1, headDim: 4, maxLength: 2 });
      const k = (values) => ({ data: Float32Array.from(values), shape: [2, 1, 1, 4] });
      // One key per entry: 0s for entry 0, 1s for entry 1; the values are the entries' numbers.
      await lib.scaledDotProductAttention(k([0, 0, 0, 0, 0, 0, 0, 0]), k([0, 0, 0, 0, 1, 1, 1, 1]),
        k([0, 0, 0, 0, 1, 1, 1, 1]), { cache });
      await cache.reorder(Int32Array.of(1, 1));
      const out = await lib.scaledDotProductAttention(k(new Array(8).fill(0)), null, null, { cache });
      assert.deepEqual(Array.from(out.data), [1, 1, 1, 1, 1, 1, 1, 1]);
      cache.dispose();
    });

    test('1,000 reorders allocate nothing', async () => {
      const cache = mha.createKVCache({ batchSize: BEAMS, maxLength: 64 });
      const x = randomTensor([64, BEAMS, E], 5);
      await mha.forward(x, x, x, { cache, ...OPTIONS });
      const indices = Int32Array.of(1, 1, 3, 0);
      await cache.reorder(indices);
      const warm = await lib.heapInfo();
      const wasm = wasmOf(lib);
      const allocate = wasm.allocate;
      let allocations = 0;
      wasm.allocate = (bytes) => { allocations++; return allocate(bytes); };
      try {
        for (let i = 0; i < 1000; i++) await cache.reorder(indices);
      } finally {
        wasm.allocate = allocate;
      }
      const end = await lib.heapInfo();
      assert.equal(allocations, 0, 'heap blocks the JS side asked for');
      assert.equal(end.inUseBytes, warm.inUseBytes, 'malloc bytes in use unchanged');
      assert.equal(end.heapTop, warm.heapTop, 'heap top (sbrk) unchanged');
      cache.dispose();
    });
  });
}

// Generation through the JS API on every WASM build (docs/design.md, "Generation: beams, ragged
// batches, sliding windows"): forward's `positions` (a padded batch's rows equal each sequence
// alone; its errors) and rolling caches (identical to a cache that keeps every key, `held`,
// truncate within what is held, the errors). PyTorch's fixtures for both run in
// decoding_fixtures.test.js (tests/fixtures/generation); 100,000 positions on a rolling cache in
// rolling_soak.test.js.
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { assertClose } from './helpers/fixtures.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const E = 16;
const CONFIG = { embedDim: E, numHeads: 4, numKVHeads: 2, rotary: { dim: 4 } };
const OPTIONS = { isCausal: true, needWeights: false };

async function rejects(promise, pattern) {
  await assert.rejects(promise, (e) => e instanceof MHAError && pattern.test(e.message));
}

// Rows `rows` of an (L, N, E) tensor's entry n.
function entryRows(t, n, rows) {
  const [, N] = t.shape;
  const data = new Float32Array(rows.length * E);
  rows.forEach((i, r) => data.set(t.data.subarray((i * N + n) * E, (i * N + n + 1) * E), r * E));
  return { data, shape: [rows.length, 1, E] };
}

for (const build of BUILDS) {
  describe(`generation on ${build}`, () => {
    let lib;
    let mha;
    before(async () => {
      lib = await loadMHA({ build });
      mha = randomModule(lib, CONFIG, 5);
    });

    test('positions: a padded batch (left pads, a hole) gives each sequence alone', async () => {
      // Entry 0: two pads, two tokens, a pad, a token; entry 1: six tokens.
      const x = randomTensor([6, 2, E], 9);
      const positions = Int32Array.of(1, 1, 0, 1, 1, 2, 0, 1, 2, 3, 4, 5);
      const keyPaddingMask = Uint8Array.of(1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0);
      const cache = mha.createKVCache({ batchSize: 2, maxLength: 7 });
      const { output } = await mha.forward(x, x, x, { ...OPTIONS, cache, positions,
        keyPaddingMask: { data: keyPaddingMask, shape: [2, 6] } });
      const alone = entryRows(x, 0, [2, 3, 5]);
      const expected = (await mha.forward(alone, alone, alone, OPTIONS)).output;
      assertClose(entryRows(output, 0, [2, 3, 5]), expected, 'entry 0 rows');
      // One more step: position 3 for entry 0, 6 for entry 1.
      const y = randomTensor([1, 2, E], 10);
      const step = await mha.forward(y, y, y, { ...OPTIONS, cache, positions: Int32Array.of(3, 6),
        keyPaddingMask: { data: Uint8Array.of(1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0), shape: [2, 7] } });
      const longer = { data: new Float32Array([...alone.data, ...y.data.subarray(0, E)]), shape: [4, 1, E] };
      const full = (await mha.forward(longer, longer, longer, OPTIONS)).output;
      assertClose(entryRows(step.output, 0, [0]), entryRows(full, 0, [3]), 'entry 0 step');
      cache.dispose();
    });

    test('positions: wrong type, no rotary, wrong length, other key rows: each rejects', async () => {
      const x = randomTensor([3, 1, E], 1);
      await rejects(mha.forward(x, x, x, { positions: [0, 1, 2] }),
        /^positions: expected an Int32Array of N \* L rotary positions \(batch-major\), received an Array/);
      await rejects(mha.forward(x, x, x, { positions: new Int32Array(2) }),
        /^forward: positions: expected 3 entries \(N \* L = 1 \* 3, batch-major\), got 2$/);
      const k = randomTensor([2, 1, E], 2);
      await rejects(mha.forward(x, k, k, { positions: new Int32Array(3) }),
        /^forward: positions: key has 2 rows and query 3/);
      const plain = randomModule(lib, { embedDim: E, numHeads: 4 }, 3);
      await rejects(plain.forward(x, x, x, { positions: new Int32Array(3) }),
        /^forward: positions: given to a module without rotary/);
      plain.dispose();
    });

    test('rolling: identical to a full cache, several times past maxLength, truncates', async () => {
      const windowed = randomModule(lib, { ...CONFIG, window: 4 }, 6);   // left window 3
      const full = windowed.createKVCache({ batchSize: 2, maxLength: 40 });
      const rolling = windowed.createKVCache({ batchSize: 2, maxLength: 5, rolling: true });
      assert.equal(rolling.rolling, true);
      assert.equal(full.rolling, false);
      const schedule = [2, 1, 1, 2, 1, 1, 1, 2, 1, 1, 1, 1, 2, 1, 1, 1];
      let seed = 20;
      for (const [s, rows] of schedule.entries()) {
        const x = randomTensor([rows, 2, E], seed++);
        const options = { ...OPTIONS, needWeights: s % 4 === 3 };
        const a = await windowed.forward(x, x, x, { ...options, cache: full });
        const b = await windowed.forward(x, x, x, { ...options, cache: rolling });
        assert.ok(sameBits(a, b), `call ${s}`);
        if (s === 9) await Promise.all([full.truncate(full.length - 2), rolling.truncate(rolling.length - 2)]);
      }
      assert.equal(rolling.length, full.length);
      assert.equal(rolling.held, 5);
      assert.equal(full.held, full.length);
      await rejects(rolling.truncate(rolling.length - 3),
        /^truncate: the rolling cache holds positions \d+\.\.\d+ \(max_length 5\); truncating to \d+ needs/);
      const x = randomTensor([3, 2, E], 99);
      await rejects(windowed.forward(x, x, x, { ...OPTIONS, cache: rolling }),
        /max_length \(5\) >= left window \(3\) \+ keys appended \(3\); append at most 2 keys a call; the cache is left as it was$/);
      await rolling.reset();
      assert.equal(rolling.held, 0);
      assert.equal(rolling.length, 0);
      assert.throws(() => mha.createKVCache({ batchSize: 1, maxLength: 8, rolling: true }),
        /^MHAError: createKVCache: cache: rolling needs a module with a finite left window/);
      assert.throws(() => windowed.createKVCache({ batchSize: 1, maxLength: 8, rolling: 1 }),
        /rolling/);
      full.dispose();
      rolling.dispose();
      windowed.dispose();
    });

    test("rolling: the functional form's cache under a call's window", async () => {
      const make = (rolling) => lib.createKVCache({ batchSize: 1, numKVHeads: 2, headDim: 8,
        maxLength: rolling ? 4 : 30, rolling });
      const [full, rolling] = [make(false), make(true)];
      for (let t = 0; t < 30; ++t) {
        const q = randomTensor([1, 4, 1, 8], 100 + t);
        const kv = randomTensor([1, 2, 1, 8], 200 + t);
        const options = { isCausal: true, enableGqa: true, window: 4 };
        const a = await lib.scaledDotProductAttention(q, kv, kv, { ...options, cache: full });
        const b = await lib.scaledDotProductAttention(q, kv, kv, { ...options, cache: rolling });
        assert.ok(sameBits({ output: a }, { output: b }), `step ${t}`);
      }
      const q = randomTensor([1, 4, 1, 8], 1);
      await rejects(lib.scaledDotProductAttention(q, null, null, { cache: rolling, enableGqa: true }),
        /a rolling cache needs a finite left window \(window\), and this call has none/);
      full.dispose();
      rolling.dispose();
    });
  });
}

// The padding a cache remembers (docs/design.md, "Caches an app keeps") through the JS API, on
// every WASM build at 1 and 2 threads: a left-padded prefill's keyPaddingMask, then steps with
// neither mask nor positions, give the same bits as passing the mask (over every slot) and
// Hugging Face's position_ids each step; cache.padding says what it remembers, save/load,
// clone and select carry it. (Through the proxy: the getter is mirrored like length.)
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BUILDS as ALL } from '../../web/src/builds.js';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const E = 16, N = 2, PROMPT = 5;
const PADS = [3, 0];   // entry 0: 3 pads, then 2 tokens
const config = (rolling) => ({ embedDim: E, numHeads: 4, numKVHeads: 2, batchFirst: true,
  rotary: { base: 10000 }, ...(rolling ? { window: [4, 0] } : {}) });

// The key padding mask over `slots` slots (1: a pad) and the position_ids of L rows from slot
// `first` (pads at 1).
const mask = (slots) => ({ data: Uint8Array.from({ length: N * slots },
  (_, i) => (i % slots < PADS[Math.floor(i / slots)] ? 1 : 0)), shape: [N, slots] });
const positions = (first, L) => Int32Array.from({ length: N * L }, (_, i) => {
  const slot = first + (i % L), pads = PADS[Math.floor(i / L)];
  return slot >= pads ? slot - pads : 1;
});

// A prefill then 6 steps on `cache`; with `explicit` every call passes mask and positions, else
// only the prefill its mask.
async function run(mha, cache, explicit, firstSeed = 1) {
  const outputs = [];
  for (let seed = firstSeed; seed < firstSeed + 7; seed++) {
    const L = cache.length === 0 ? PROMPT : 1, P = cache.length;
    const x = randomTensor([N, L, E], seed);
    const given = explicit ? { keyPaddingMask: mask(P + L), positions: positions(P, L) }
      : P === 0 ? { keyPaddingMask: mask(L) } : {};
    outputs.push(await mha.forward(x, x, x, { cache, isCausal: true, needWeights: false, ...given }));
  }
  return outputs;
}

const assertSameRuns = (a, b, what) =>
  a.forEach((output, i) => assert.ok(sameBits(output, b[i]), `${what}: call ${i} differs`));

for (const build of BUILDS) {
  describe(`a cache remembers padding on ${build}`, () => {
    for (const threads of ALL[build].threads ? [1, 2] : [1]) {
      test(`remembered padding equals explicit masks and positions, bit for bit (${threads} threads)`, async () => {
        const lib = await loadMHA({ build, threads });
        for (const rolling of [false, true]) {
          const mha = randomModule(lib, config(rolling), 7);
          const options = { batchSize: N, maxLength: rolling ? 9 : 16, rolling };  // the ring wraps
          const remembered = mha.createKVCache(options), given = mha.createKVCache(options);
          const outputs = await run(mha, remembered, false);
          assert.deepEqual(remembered.padding, PADS);
          assertSameRuns(outputs, await run(mha, given, true), rolling ? 'rolling' : 'plain');
          // A step's own mask overrides: one of no pads changes entry 0, not entry 1 (no
          // pads). (The rolling cache's window no longer reaches the pads.)
          const y = randomTensor([N, 1, E], 30);
          const unmasked = await remembered.clone();
          const none = { data: new Uint8Array(N * (remembered.length + 1)),
            shape: [N, remembered.length + 1] };
          const a = await mha.forward(y, y, y, { cache: unmasked, keyPaddingMask: none,
            needWeights: false });
          const b = await mha.forward(y, y, y, { cache: remembered, needWeights: false });
          const same = (from, to) => a.output.data.subarray(from, to)
            .every((v, i) => v === b.output.data[from + i]);
          assert.equal(same(0, E), rolling);
          assert.ok(same(E, 2 * E));
          for (const cache of [remembered, given, unmasked]) cache.dispose();
          mha.dispose();
        }
      });
    }

    test('save/load, clone and select carry the padding; reset forgets it', async () => {
      const lib = await loadMHA({ build });
      const mha = randomModule(lib, config(false), 8);
      const cache = mha.createKVCache({ batchSize: N, maxLength: 24, dtype: 'float16' });
      await run(mha, cache, false);
      const loaded = await mha.loadKVCache(await cache.save());
      const copy = await cache.clone();
      const beams = await cache.select(Int32Array.of(1, 0, 0));
      assert.deepEqual(loaded.padding, PADS);
      assert.deepEqual(copy.padding, PADS);
      assert.deepEqual(beams.padding, [0, 3, 3]);
      assertSameRuns(await run(mha, loaded, false, 20), await run(mha, cache, false, 20), 'loaded');
      await cache.reset();
      assert.deepEqual(cache.padding, [0, 0]);
      for (const c of [cache, loaded, copy, beams]) c.dispose();
      mha.dispose();
    });
  });
}

test('through the proxy in Node: cache.padding and rolling: { keep } are mirrored, saved and loaded', async () => {
  const [inThread, proxied] = [await loadMHA(), await loadMHA({ proxy: true })];
  const results = [];
  for (const lib of [inThread, proxied]) {
    const mha = randomModule(lib, config(false), 9);
    const cache = mha.createKVCache({ batchSize: N, maxLength: 16 });
    assert.deepEqual(cache.padding, [0, 0]);
    const outputs = await run(mha, cache, false);
    assert.deepEqual(cache.padding, PADS);
    const loaded = await mha.loadKVCache(await cache.save());
    assert.deepEqual(loaded.padding, PADS);
    const streaming = mha.createKVCache({ batchSize: N, maxLength: 6, rolling: { keep: 2 } });
    const restored = await mha.loadKVCache(await streaming.save());
    assert.deepEqual([streaming.rolling, restored.rolling], [{ keep: 2 }, { keep: 2 }]);
    results.push(outputs);
    for (const x of [cache, loaded, streaming, restored, mha]) x.dispose();
  }
  assertSameRuns(results[1], results[0], 'proxied');
  proxied.dispose();
});

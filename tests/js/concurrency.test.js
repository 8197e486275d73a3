// Several modules used alternately, many forward Promises in flight at once
// and dispose() while a forward is pending: every result is bitwise the one
// the same call gives alone, on both builds.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS, separateLibrary } from './helpers/builds.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

// Three differently shaped modules and one call plan per module.
function makeModules(lib) {
  return [
    randomModule(lib, { embedDim: 16, numHeads: 2 }, 1),
    randomModule(lib, { embedDim: 32, numHeads: 4, kdim: 8, vdim: 12, batchFirst: true }, 2),
    randomModule(lib, { embedDim: 24, numHeads: 3, addBiasKV: true, addZeroAttn: true }, 3),
  ];
}

// [module index, (mha) => Promise]: self-, cross-attention, masks, SDPA.
function makeCalls(lib, modules) {
  const x = randomTensor([9, 2, 16], 10);
  const q2 = randomTensor([2, 70, 32], 11);
  const k2 = randomTensor([2, 33, 8], 12);
  const v2 = randomTensor([2, 33, 12], 13);
  const kpm = { data: new Uint8Array(2 * 33).map((_, i) => (i % 5 === 0 ? 1 : 0)), shape: [2, 33] };
  const q3 = randomTensor([17, 24], 14);
  const attnMask = { data: randomTensor([17, 17], 15).data, shape: [17, 17] };
  const sq = randomTensor([2, 3, 40, 8], 16);
  const sk = randomTensor([2, 3, 50, 8], 17);
  const sv = randomTensor([2, 3, 50, 5], 18);
  const [m1, m2, m3] = modules;
  return [
    () => m1.forward(x, x, x, { isCausal: true }),
    () => m2.forward(q2, k2, v2, { keyPaddingMask: kpm, averageAttnWeights: false }),
    () => m3.forward(q3, q3, q3, { attnMask, needWeights: false }),
    () => lib.scaledDotProductAttention(sq, sk, sv, { isCausal: true }).then((output) => ({ output })),
    () => m1.forward(x, x, x, { needWeights: false }),
    () => m2.forward(q2, k2, v2),
  ];
}

for (const build of BUILDS) {
  describe(`concurrency on ${build}`, () => {
    test('modules used alternately and 60 Promises in flight match sequential calls', async () => {
      const lib = await loadMHA({ build });
      const modules = makeModules(lib);
      const calls = makeCalls(lib, modules);
      const expected = [];
      for (const call of calls) expected.push(await call());

      // Round-robin over the modules, awaiting each call.
      for (let round = 0; round < 3; ++round) {
        for (let i = 0; i < calls.length; ++i) {
          assert.ok(sameBits(await calls[i](), expected[i]), `round ${round}, call ${i}`);
        }
      }
      // Everything started before anything is awaited, in a shuffled order.
      const order = Array.from({ length: 10 * calls.length }, (_, i) => (i * 7) % calls.length);
      const results = await Promise.all(order.map((i) => calls[i]()));
      results.forEach((r, j) => assert.ok(sameBits(r, expected[order[j]]), `in flight #${j}`));
      modules.forEach((m) => m.dispose());
    });

    test('two libraries of the same build used alternately agree', async () => {
      const libs = [await loadMHA({ build }), await separateLibrary(build)];
      assert.notEqual(libs[0], libs[1]);
      const plans = libs.map((lib) => makeCalls(lib, makeModules(lib)));
      for (let i = 0; i < plans[0].length; ++i) {
        const [a, b] = await Promise.all([plans[0][i](), plans[1][i]()]);
        assert.ok(sameBits(a, b), `call ${i}`);
      }
    });

    test('dispose() while forwards are pending: they resolve, later calls reject', async () => {
      const lib = await loadMHA({ build });
      const [m1, m2] = makeModules(lib);
      const x = randomTensor([9, 2, 16], 10);
      const expected = await m1.forward(x, x, x);
      const before = Array.from({ length: 5 }, () => m1.forward(x, x, x));
      m1.dispose();
      await assert.rejects(m1.forward(x, x, x), (e) => e instanceof MHAError && /disposed/.test(e.message));
      m1.dispose();   // a second dispose() is a no-op
      for (const result of await Promise.all(before)) assert.ok(sameBits(result, expected));
      await assert.rejects(m1.loadStateDict({}), MHAError);
      // The library and its other modules are unaffected.
      const q = randomTensor([2, 70, 32], 11);
      const k = randomTensor([2, 33, 8], 12);
      const v = randomTensor([2, 33, 12], 13);
      const again = randomModule(lib, { embedDim: 32, numHeads: 4, kdim: 8, vdim: 12, batchFirst: true }, 2);
      assert.ok(sameBits(await m2.forward(q, k, v), await again.forward(q, k, v)));
      m2.dispose();
      again.dispose();
    });
  });
}

// The heap filled to its 4 GiB limit: a forward that cannot get memory is an
// MHAError, and the same module then runs a valid forward (the threaded build
// once left its lock held here: Emscripten 3.1.6 mishandled C++ exceptions
// allocated above 2 GiB, see scripts/build_wasm.sh). Each build in its own
// library, disposed after, so the 4 GiB are given back.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';

const E = 8;
const ones = (L) => ({ data: new Float32Array(L * E).fill(1), shape: [L, E] });

for (const build of BUILDS) {
  describe(`heap exhaustion (${build})`, () => {
    test('a forward past the full heap rejects with an MHAError and the module still works', { timeout: 120_000 }, async () => {
      const lib = await loadMHA({ build, threads: build === 'simd' ? 1 : 2 });
      const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: 2 });
      const stateDict = {};
      for (const { name, shape } of mha.parameters) {
        stateDict[name] = new Float32Array(shape.reduce((a, b) => a * b)).fill(0.1);
      }
      mha.loadStateDict(stateDict);
      const small = ones(3);
      const before = await mha.forward(small, small, small);
      // Fill the heap with large caches (512 MiB each, allocated when
      // created; a module's weights wait for its load) until one cannot be
      // created.
      const fillers = [];
      assert.throws(() => {
        for (let i = 0; i < 64; ++i) {
          fillers.push(lib.createKVCache({ batchSize: 8, numKVHeads: 8, headDim: 256, maxLength: 4096 }));
        }
      }, MHAError);
      assert.ok(fillers.length > 0);
      const big = ones(9000);
      for (let attempt = 0; attempt < 2; ++attempt) {
        await assert.rejects(mha.forward(big, big, big, { averageAttnWeights: false }),
          (e) => e instanceof MHAError && /out of memory/.test(e.message));
      }
      const after = await mha.forward(small, small, small);
      assert.deepEqual(after.output.data, before.output.data);
      for (const m of fillers) m.dispose();
      mha.dispose();
    });
  });
}

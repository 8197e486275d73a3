// Loads are all or nothing through the package too (multihead_attention.h:
// "an error loads nothing"): each heap allocation of a loadStateDict or a
// loadSafetensors made to fail in turn (the JS side's copies into the heap)
// rejects with an MHAError and leaves the module's outputs bit for bit and
// its memory as they were; the load then succeeds.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { wasmOf } from '../../web/src/library.js';
import { BUILDS } from './helpers/builds.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';
import { writeSafetensors } from './helpers/safetensors.js';

const CONFIG = { embedDim: 16, numHeads: 2, kdim: 8, vdim: 8 };   // split projections

// Fails allocation number `k` of `wasm` (0: the first) while `load` runs.
async function failingAt(wasm, k, load) {
  const { allocate } = wasm;
  let left = k;
  wasm.allocate = (bytes) => (left-- === 0 ? 0 : allocate(bytes));
  try {
    await load();
    return true;
  } catch (error) {
    assert.ok(error instanceof MHAError && /out of memory/.test(error.message), error.message);
    return false;
  } finally {
    wasm.allocate = allocate;
  }
}

for (const build of BUILDS) {
  describe(`loads that fail on ${build}`, () => {
    test('each allocation failed in turn loads nothing', async () => {
      const lib = await loadMHA({ build });
      const wasm = wasmOf(lib);
      const mha = randomModule(lib, CONFIG, 1);
      const x = randomTensor([3, 1, 16], 2);
      const kv = randomTensor([3, 1, 8], 3);
      const run = () => mha.forward(x, kv, kv);
      const other = Object.fromEntries(mha.parameters.map(({ name, shape }, i) =>
        [name, randomTensor(shape, 50 + i).data]));
      const file = writeSafetensors(Object.fromEntries(mha.parameters.map(({ name, shape }) =>
        [name, { shape, data: other[name] }])));
      for (const [what, load] of [['loadStateDict', () => mha.loadStateDict(other)],
        ['loadSafetensors', () => mha.loadSafetensors(file)]]) {
        const before = await run();
        const memory = mha.memory;
        let k = 0;
        while (!(await failingAt(wasm, k, load))) {
          assert.ok(sameBits(await run(), before), `${what}: allocation ${k} failed: output changed`);
          assert.equal(mha.memory, memory, `${what}: allocation ${k}`);
          k += 1;
        }
        assert.ok(k > 0, `${what}: no allocation to fail`);
        assert.ok(!sameBits(await run(), before), `${what}: the load changed nothing`);
        await mha.loadStateDict(Object.fromEntries(mha.parameters.map(({ name, shape }, i) =>
          [name, randomTensor(shape, 100 + i).data])));
      }
      mha.dispose();
    });
  });
}

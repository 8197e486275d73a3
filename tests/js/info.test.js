// lib.info and the choice of build and threads.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { relaxedSimdSupported } from '../../web/src/load.js';
import { BUILDS } from './helpers/builds.js';
import { assertClose } from './helpers/fixtures.js';

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url)));

describe('info', () => {
  for (const build of BUILDS) {
    test(`${build}: Highway runs its WASM SIMD128 target, not scalar emulation`, async () => {
      const lib = await loadMHA({ build });
      assert.equal(lib.info.build, build);
      assert.equal(lib.info.target, 'WASM');
      assert.equal(lib.info.simd, true);
      assert.equal(lib.info.version, packageJson.version);
    });
  }

  test('Node gets a threaded build, with min(cores, 4) threads by default', async () => {
    const lib = await loadMHA();
    assert.equal(lib.info.build, relaxedSimdSupported() ? 'relaxed-simd-threaded' : 'simd-threaded');
    assert.equal(lib.info.threads, Math.min(availableParallelism(), 4));
    // The probe's answer, whichever build runs (the browser table reads it from here).
    assert.equal(lib.info.relaxedSimd, relaxedSimdSupported());
    assert.equal((await loadMHA({ build: 'simd' })).info.relaxedSimd, relaxedSimdSupported());
  });

  test('Node runs in the calling thread unless proxy: true, and says why threads are off only when asked', async () => {
    const threaded = await loadMHA({ proxy: 'auto' });
    assert.equal(threaded.info.proxy, false);
    assert.equal(threaded.info.threadsOffReason, null);
    assert.equal((await loadMHA({ build: 'simd', proxy: false })).info.threadsOffReason,
      "build 'simd' was asked for");
    const proxied = await loadMHA({ proxy: true });
    assert.deepEqual(proxied.info, { ...threaded.info, proxy: true });
    proxied.dispose();
    await assert.rejects(loadMHA({ proxy: 'yes' }),
      (e) => e instanceof MHAError && /proxy: expected 'auto', true or false, received the string 'yes'/.test(e.message));
  });

  test('an explicit thread count is honoured up to the pool of 8', async () => {
    assert.equal((await loadMHA({ threads: 3 })).info.threads, 3);
    assert.equal((await loadMHA({ threads: 64 })).info.threads, 8);
  });

  test('the single-thread build runs one thread and refuses more', async () => {
    assert.equal((await loadMHA({ build: 'simd' })).info.threads, 1);
    await assert.rejects(loadMHA({ build: 'simd', threads: 2 }),
      (e) => e instanceof MHAError && /threads: expected 'auto' or 1 .* received number 2/.test(e.message));
  });

  test('results do not depend on the thread count', async () => {
    const forward = async (threads) => {
      const lib = await loadMHA({ threads });
      const mha = lib.createMultiheadAttention({ embedDim: 32, numHeads: 4 });
      const stateDict = {};
      for (const { name, shape } of mha.parameters) {
        const n = shape.reduce((a, b) => a * b, 1);
        stateDict[name] = Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + n));
      }
      mha.loadStateDict(stateDict);
      const x = { data: Float32Array.from({ length: 40 * 3 * 32 }, (_, i) => Math.cos(i * 0.11)),
        shape: [40, 3, 32] };
      return mha.forward(x, x, x, { isCausal: true });
    };
    const one = await forward(1);
    const three = await forward(3);
    assertClose(three.output, one.output, 'output with 3 threads');
    assertClose(three.weights, one.weights, 'weights with 3 threads');
  });
});

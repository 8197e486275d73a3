// loadMHA() loads once per set of options, and lib.dispose() frees a library: its modules and
// caches, its thread pool's Workers, its memory (docs/design.md, "Loading in real apps").
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { processStatus } from './helpers/process_status.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

// The status once terminated Workers have ended and collected memory is returned (both settle
// some time after dispose()): polled until the thread count is at most `threadsAtMost` and has
// stopped falling (Workers an earlier test disposed may still be ending).
async function settledStatus(threadsAtMost = Infinity) {
  let status = processStatus();
  for (let attempt = 0, steady = 0; attempt < 100 && (status.threads > threadsAtMost || steady < 5);
       ++attempt) {
    gc();
    await sleep(20);
    const next = processStatus();
    steady = next.threads < status.threads ? 0 : steady + 1;
    status = next;
  }
  gc();
  return processStatus();
}

const isDisposed = (what) => (e) => e instanceof MHAError &&
  new RegExp(`^${what}: expected a live \\w+, received one that was disposed`).test(e.message);

test('the same options give the same library, while it loads and after', async () => {
  const [a, b] = await Promise.all([loadMHA({ threads: 2 }), loadMHA({ threads: 2 })]);
  assert.equal(a, b);
  assert.equal(await loadMHA({ threads: 2, proxy: 'auto' }), a);
  assert.notEqual(await loadMHA({ threads: 1 }), a);
  assert.equal(await loadMHA(), await loadMHA({ threads: 'auto' }));
  a.dispose();
  const c = await loadMHA({ threads: 2 });
  assert.notEqual(c, a);
  assert.equal(await loadMHA({ threads: 2 }), c);
  c.dispose();
});

test('options that resolve to the same build and threads give the same library', async () => {
  const simd = await loadMHA({ build: 'simd' });
  assert.equal(await loadMHA({ build: 'simd', threads: 1 }), simd);
  assert.equal(await loadMHA({ build: 'simd', threads: 'auto', proxy: false }), simd);
  const auto = await loadMHA();
  assert.equal(await loadMHA({ threads: auto.info.threads, build: auto.info.build }), auto);
  assert.notEqual(await loadMHA({ threads: 1, build: auto.info.build }), simd);
  simd.dispose();
  auto.dispose();
});

test('a failed load is not kept', async () => {
  await assert.rejects(loadMHA({ build: 'simd', threads: 2 }), MHAError);
  await assert.rejects(loadMHA({ build: 'simd', threads: 2 }), MHAError);
});

test('dispose() disposes what the library made, and its calls then fail', async () => {
  const lib = await loadMHA({ threads: 2 });
  const mha = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2 });
  const cache = lib.createKVCache({ batchSize: 1, numKVHeads: 2, headDim: 4, maxLength: 8 });
  lib.dispose();
  lib.dispose();   // a second call does nothing
  assert.throws(() => mha.memory, isDisposed('mha.memory'));
  assert.throws(() => cache.length, isDisposed('cache.length'));
  assert.throws(() => lib.createMultiheadAttention({ embedDim: 8, numHeads: 2 }),
    isDisposed('createMultiheadAttention'));
  assert.throws(() => lib.createKVCache({ batchSize: 1, numKVHeads: 2, headDim: 4, maxLength: 8 }),
    isDisposed('createKVCache'));
  await assert.rejects(lib.heapInfo(), isDisposed('heapInfo'));
  const x = { data: new Float32Array(8), shape: [1, 1, 8] };
  await assert.rejects(mha.forward(x, x, x), isDisposed('forward'));
});

test('a pool runs as many Workers as threads, and 20 loads and disposals keep threads and memory flat', async (t) => {
  const before = await settledStatus();
  const lib = await loadMHA({ threads: 3 });
  const loaded = processStatus();
  // Two Workers beside the calling thread (each Worker may add a thread or two of Node's own).
  assert.ok(loaded.threads - before.threads >= 2 && loaded.threads - before.threads <= 6,
    `threads ${before.threads} -> ${loaded.threads} for a pool of 3`);
  lib.dispose();
  const first = await settledStatus(before.threads);
  for (let i = 0; i < 20; ++i) {
    const each = await loadMHA({ threads: 3 });
    const mha = each.createMultiheadAttention({ embedDim: 64, numHeads: 4 });
    await mha.loadStateDict({ in_proj_weight: new Float32Array(3 * 64 * 64), 'out_proj.weight': new Float32Array(64 * 64),
      in_proj_bias: new Float32Array(3 * 64), 'out_proj.bias': new Float32Array(64) });
    each.dispose();
  }
  const after = await settledStatus(first.threads);
  t.diagnostic(`threads ${before.threads} -> ${loaded.threads} loaded -> ${first.threads} disposed -> ` +
               `${after.threads} after 20 more; RSS ${first.rssMB.toFixed(0)} -> ${after.rssMB.toFixed(0)} MB`);
  assert.ok(after.threads <= first.threads, `threads ${first.threads} -> ${after.threads} after 20 loads`);
  assert.ok(after.rssMB - first.rssMB < 64,
    `resident memory ${first.rssMB.toFixed(0)} -> ${after.rssMB.toFixed(0)} MB after 20 loads`);
});

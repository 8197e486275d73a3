// Modules and caches the user forgets to dispose are freed once garbage-collected.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { loadMHA } from '../../web/src/index.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc');

test('a FinalizationRegistry frees modules and caches that were never disposed', async () => {
  const lib = await loadMHA({ build: 'simd' });
  const before = (await lib.heapInfo()).inUseBytes;
  (() => {
    for (let i = 0; i < 20; ++i) {
      lib.createMultiheadAttention({ embedDim: 256, numHeads: 4 }).createKVCache({ batchSize: 1, maxLength: 256 });
      lib.createKVCache({ batchSize: 1, numKVHeads: 4, headDim: 64, maxLength: 256 });
    }
  })();
  assert.ok((await lib.heapInfo()).inUseBytes - before > 20 * 4 * 256 * 256, 'the modules hold memory');
  // Finalizers run some time after a collection.
  for (let attempt = 0; attempt < 50 && (await lib.heapInfo()).inUseBytes > before; ++attempt) {
    gc();
    await sleep(20);
  }
  assert.equal((await lib.heapInfo()).inUseBytes, before);
});

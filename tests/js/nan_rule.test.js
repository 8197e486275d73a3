// docs/design.md, "Semantics (the contract)": a NaN reaches exactly the rows
// that read it, at every thread count. Through the package: a decoding step
// over a cache of 2048 keys whose first 1100 slots are padded, a NaN in the
// value of slot 5 (padding before every key the step reads: never read),
// gives the same finite bits at 1 and 2 threads; a NaN in the value of slot
// 1500 (read) gives NaN at both.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';

const E = 64;
const KEYS = 2048;

async function step(threads, nanAt) {
  const lib = await loadMHA({ build: 'simd-threaded', threads });
  const mha = randomModule(lib, { embedDim: E, numHeads: 4 }, 7);
  const cache = mha.createKVCache({ batchSize: 1, maxLength: KEYS });
  const x = randomTensor([KEYS, 1, E], 8);
  const value = { data: x.data.slice(), shape: x.shape };
  value.data[nanAt * E + 3] = NaN;
  const padding = new Uint8Array(KEYS).map((_, j) => (j < 1100 ? 1 : 0));
  const prefill = (t) => ({ data: t.data.subarray(0, (KEYS - 1) * E), shape: [KEYS - 1, 1, E] });
  await mha.forward(prefill(x), prefill(x), prefill(value), { cache, isCausal: true,
    needWeights: false, keyPaddingMask: { data: padding.subarray(0, KEYS - 1), shape: [1, KEYS - 1] } });
  const last = (t) => ({ data: t.data.subarray((KEYS - 1) * E), shape: [1, 1, E] });
  const result = await mha.forward(last(x), last(x), last(value), { cache, isCausal: true,
    needWeights: false, keyPaddingMask: { data: padding, shape: [1, KEYS] } });
  mha.dispose();
  return result;
}

test('a NaN in a padded slot before the keys a step reads: the same finite bits at 1 and 2 threads', async () => {
  const one = await step(1, 5);
  const two = await step(2, 5);
  assert.ok(one.output.data.every(Number.isFinite), `1 thread: ${one.output.data.slice(0, 4)}`);
  assert.ok(sameBits(one, two), `1 thread ${one.output.data.slice(0, 4)}, 2: ${two.output.data.slice(0, 4)}`);
});

test('a NaN in a value the step reads: NaN at 1 and 2 threads', async () => {
  for (const threads of [1, 2]) {
    const { output } = await step(threads, 1500);
    assert.ok(output.data.every(Number.isNaN), `${threads} threads: ${output.data.slice(0, 4)}`);
  }
});

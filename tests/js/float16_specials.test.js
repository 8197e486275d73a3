// A float16 cache in WebAssembly stores and reads as IEEE halves do on
// every native target (src/kernels/float16-inl.h): round to nearest even,
// beyond the half range to infinity, infinities and NaN kept. Each case
// attends one cached key, so the output is the stored value itself; 17
// queries take the flash kernel, 1 the decode kernel.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';

const VALUES = [1e5, -1e5, 70000, 65519, Infinity, NaN, 1 / 3, 65520, -65504, 2 ** -25 * 3];
// The halves nearest VALUES, ties to even (65520 is the tie between 65504
// and 2^16: infinity; 3 * 2^-25 is the tie between the subnormals 2^-24 and 2^-23).
const STORED = [Infinity, -Infinity, Infinity, 65504, Infinity, NaN, 0.333251953125, Infinity,
  -65504, 2 ** -23];

function tensor(shape, fill) {
  return { data: new Float32Array(shape.reduce((a, b) => a * b, 1)).map(fill), shape };
}

async function attendOneKey(lib, key, value, queries) {
  const E = value.length;
  const cache = lib.createKVCache({ batchSize: 1, numKVHeads: 1, headDim: E, maxLength: 2,
    dtype: 'float16' });
  const k = { data: Float32Array.from(key), shape: [1, 1, 1, E] };
  const v = { data: Float32Array.from(value), shape: [1, 1, 1, E] };
  const q = tensor([1, 1, queries, E], () => 0);
  const output = await lib.scaledDotProductAttention(q, k, v, { cache });
  return Array.from(output.data.subarray(0, E));
}

for (const build of BUILDS) {
  describe(`float16 cache specials on ${build}`, () => {
    for (const queries of [1, 17]) {
      test(`${queries} queries: values stored rounded to nearest even, overflow to infinity`,
        async () => {
          const lib = await loadMHA({ build });
          const out = await attendOneKey(lib, VALUES.map(() => 0), VALUES, queries);
          assert.deepEqual(out, STORED);
        });

      test(`${queries} queries: a key beyond the half range is infinite (0 * inf: NaN)`,
        async () => {
          const lib = await loadMHA({ build });
          const key = [1e5, 0, 0, 0];
          assert.ok((await attendOneKey(lib, key, [1, 2, 3, 4], queries)).every(Number.isNaN));
          key[0] = 60000;  // finite as a half: score 0, output the value
          assert.deepEqual(await attendOneKey(lib, key, [1, 2, 3, 4], queries), [1, 2, 3, 4]);
        });
    }
  });
}

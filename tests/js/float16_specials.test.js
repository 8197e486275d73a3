// A float16 or bfloat16 cache in WebAssembly stores and reads as on every
// native target (src/kernels/float16-inl.h): round to nearest even, beyond
// the range to infinity, infinities and NaN kept, every 16-bit value read
// back exactly. Each case attends one cached key, so the output is the
// stored value itself; 17 queries take the flash kernel, 1 the decode kernel.
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

// bfloat16: 2^128 * (1 - 2^-9) and beyond round to infinity; 1 + 2^-8,
// 1 + 3 * 2^-8 and the subnormal 3 * 2^-134 are ties (to 1, 1 + 2^-6 and
// 2^-132); 1/3's upper half rounds up; 2^-149 (below half of bfloat16's
// smallest subnormal, 2^-133) to 0.
const BF16_VALUES = [3.4028234663852886e38, -Infinity, NaN, 1 + 2 ** -8, 1 + 3 * 2 ** -8,
  1 / 3, 3 * 2 ** -134, 2 ** -149, 1e5];
const BF16_STORED = [Infinity, -Infinity, NaN, 1, 1 + 2 ** -6, 0.333984375, 2 ** -132, 0, 99840];

// Every value of the 16-bit format, from its bits.
const halfValue = (b) => {
  const e = (b >> 10) & 31, m = b & 1023, sign = b & 0x8000 ? -1 : 1;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (e ? (1024 + m) * 2 ** (e - 25) : m * 2 ** -24);
};
const bfloat16Value = (b) => new Float32Array(Uint32Array.of(b << 16).buffer)[0];
const EVERY = { float16: halfValue, bfloat16: bfloat16Value };

// The output of queries (zeros) against one cached key per head: each
// head's value row as stored. key and value: heads rows of E.
async function attendOneKey(lib, key, value, queries, dtype = 'float16', heads = 1) {
  const E = value.length / heads;
  const cache = lib.createKVCache({ batchSize: 1, numKVHeads: heads, headDim: E, maxLength: 2,
    dtype });
  const k = { data: Float32Array.from(key), shape: [1, heads, 1, E] };
  const v = { data: Float32Array.from(value), shape: [1, heads, 1, E] };
  const q = tensor([1, heads, queries, E], () => 0);
  const output = await lib.scaledDotProductAttention(q, k, v, { cache });
  cache.dispose();
  const rows = Array.from({ length: heads }, (_, h) =>
    Array.from(output.data.subarray(h * queries * E, h * queries * E + E)));
  return rows.flat();
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

      test(`${queries} queries: bfloat16 rounds to nearest even, overflow to infinity`,
        async () => {
          const lib = await loadMHA({ build });
          const out = await attendOneKey(lib, BF16_VALUES.map(() => 0), BF16_VALUES, queries,
            'bfloat16');
          assert.deepEqual(out, BF16_STORED);
        });

      for (const [dtype, valueOf] of Object.entries(EVERY)) {
        test(`${queries} queries: every ${dtype} value is stored and read back exactly`,
          async () => {
            const lib = await loadMHA({ build });
            const values = Array.from({ length: 65536 }, (_, b) => valueOf(b));
            // 64 heads of 1024: the rows of 8 values the widening takes at once, and more.
            const out = await attendOneKey(lib, values.map(() => 0), values, queries, dtype, 64);
            for (let b = 0; b < 65536; ++b) {
              // 0 * acc + 1 * -0 is +0: zeros compare equal whatever their sign.
              assert.ok(out[b] === values[b] || (Number.isNaN(out[b]) && Number.isNaN(values[b])),
                `${dtype} bits ${b}: ${values[b]} read back as ${out[b]}`);
            }
          });
      }
    }
  });
}

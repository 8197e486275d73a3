// call_frame.js lays every tensor of a call into one heap block: two tensors
// that share one data array, the later reading more of it than the earlier,
// each get the bytes they read (the earlier's copy is written too). A query
// whose shape getter answers (1, 3, 4) to validation and (1, 1, 4) to the
// copy (the hostile case call_frame.js reads shapes again for) shares its
// data with key and value (1, 3, 4): the core must see its first 4 floats.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomTensor } from './helpers/random.js';

for (const build of BUILDS) {
  describe(`call frames on ${build}`, () => {
    test('a query sharing its data array with a longer key and value', async () => {
      const lib = await loadMHA({ build });
      const { data } = randomTensor([1, 3, 4], 5);
      let reads = 0;
      const shared = { data, get shape() { reads += 1; return reads === 1 ? [1, 3, 4] : [1, 1, 4]; } };
      const kv = { data, shape: [1, 3, 4] };
      const apart = { data: data.slice(0, 4), shape: [1, 1, 4] };
      // First: the scratch block then holds no earlier call's copy of the query.
      const actual = await lib.scaledDotProductAttention(shared, kv, kv);
      const expected = await lib.scaledDotProductAttention(apart, kv, kv);
      assert.deepEqual(actual.shape, [1, 1, 4]);
      assert.deepEqual(Array.from(actual.data), Array.from(expected.data));
    });
  });
}

// What a caller can reach on the package's objects (in the calling thread):
// the engine's internals are private, `parameters` cannot be changed, and a
// module or a cache prints one readable line and serializes to a small
// summary at once (not the engine's internals).
import assert from 'node:assert/strict';
import { inspect } from 'node:util';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomModule } from './helpers/random.js';

const CONFIG = { embedDim: 8, numHeads: 2 };

for (const build of BUILDS) {
  describe(`the objects a caller holds, on ${build}`, () => {
    test('no internals to reach: lib.wasm, mha.config, mha.life', async () => {
      const lib = await loadMHA({ build });
      const mha = lib.createMultiheadAttention(CONFIG);
      assert.equal(lib.wasm, undefined);
      assert.equal(mha.config, undefined);
      assert.equal(mha.life, undefined);
      assert.deepEqual(Object.keys(mha), []);
      mha.dispose();
    });

    test('parameters is frozen: changing a shape cannot change what a load checks', async () => {
      const lib = await loadMHA({ build });
      const mha = lib.createMultiheadAttention(CONFIG);
      const { parameters } = mha;
      assert.ok(Object.isFrozen(parameters));
      assert.throws(() => { parameters[0].shape[0] = 1; }, TypeError);
      assert.throws(() => { parameters.push({ name: 'x', shape: [1] }); }, TypeError);
      assert.deepEqual(mha.parameters[0], { name: 'in_proj_weight', shape: [24, 8] });
      mha.dispose();
    });

    test('a module and a cache print one line and serialize to a summary', async () => {
      const lib = await loadMHA({ build });
      const mha = randomModule(lib, CONFIG, 3);
      const cache = mha.createKVCache({ batchSize: 1, maxLength: 16 });
      const started = Date.now();
      assert.deepEqual(JSON.parse(JSON.stringify(cache)), { batchSize: 1, maxLength: 16,
        dtype: 'float32', rolling: false, length: 0, held: 0, bytes: cache.bytes });
      assert.deepEqual(JSON.parse(JSON.stringify(mha)), { embedDim: 8, numHeads: 2, numKVHeads: 2,
        weightsDtype: 'auto', memory: mha.memory });
      assert.ok(Date.now() - started < 1000);
      for (const [object, name] of [[cache, 'KVCache'], [mha, 'MultiheadAttention']]) {
        const line = inspect(object);
        assert.ok(line.startsWith(`${name} {`) && !line.includes('\n') && line.length < 200, line);
      }
      cache.dispose();
      mha.dispose();
      assert.equal(inspect(cache), 'KVCache {"disposed":true}');
      assert.equal(JSON.stringify(mha), '{"disposed":true}');
    });
  });
}

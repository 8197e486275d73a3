// tests/native/nan_test.cc's two points of today's models in WebAssembly, on
// every build: a row whose every key is masked is NaN even with a sink
// (docs/design.md: there is nothing to attend), in the flash kernel, the weights
// path and decoding steps; and a window skips the key tiles outside it, so a
// NaN first token reaches only the rows that see it (a mask would spread
// PyTorch's 0 * NaN to every row).
import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomModule, randomTensor } from './helpers/random.js';

const E = 8;

// Rows [first, first + rows) of `data` (width floats each): NaN for `empty`, else finite.
function expectRows(data, first, rows, width, empty, what) {
  for (let i = 0; i < rows; i++) {
    const row = data.subarray(i * width, (i + 1) * width);
    const ok = first + i === empty ? row.every(Number.isNaN) : row.every(Number.isFinite);
    assert.ok(ok, `${what}: row ${first + i} = ${row.slice(0, 4).join(', ')}...`);
  }
}

const stepOf = (x, i) => ({ data: x.data.slice(i * E, (i + 1) * E), shape: [1, 1, E] });

for (const build of BUILDS) {
  describe(`rows with no key and windows on ${build}`, () => {
    let lib;
    before(async () => { lib = await loadMHA({ build }); });

    test('sinks do not rescue a row with no key (query 41: window 2, keys 40 and 41 padded)', async () => {
      const rows = 64;
      const empty = 41;
      const mha = randomModule(lib, { embedDim: E, numHeads: 2, sinks: true, window: 2 }, 3);
      const x = randomTensor([rows, 1, E], 5);
      const padding = new Uint8Array(rows);
      padding[empty - 1] = padding[empty] = 1;
      const keyPaddingMask = (n) => ({ data: padding.slice(0, n), shape: [1, n] });
      for (const needWeights of [false, true]) {
        const r = await mha.forward(x, x, x, { isCausal: true, needWeights, keyPaddingMask: keyPaddingMask(rows) });
        expectRows(r.output.data, 0, rows, E, empty, needWeights ? 'weights path' : 'flash');
        if (needWeights) expectRows(r.weights.data, 0, rows, rows, empty, 'weights');
      }
      const cache = mha.createKVCache({ batchSize: 1, maxLength: rows });
      for (let i = 0; i <= empty + 1; i++) {
        const t = stepOf(x, i);
        const r = await mha.forward(t, t, t, { cache, needWeights: false, keyPaddingMask: keyPaddingMask(i + 1) });
        expectRows(r.output.data, i, 1, E, empty, 'decode step');
      }
      cache.dispose();
      mha.dispose();
    });

    test('a window never reads the key tiles outside it', async () => {
      const rows = 200;
      const prefill = 190;
      const mha = randomModule(lib, { embedDim: E, numHeads: 2, window: 4 }, 4);
      const x = randomTensor([rows, 1, E], 6);
      x.data[0] = NaN;
      const { output } = await mha.forward(x, x, x, { isCausal: true, needWeights: false });
      // Rows 0-3 see key 0; from 128 on, every query chunk starts past its tile.
      for (let i = 0; i < 4; i++) assert.ok(Number.isNaN(output.data[i * E]), `flash row ${i}`);
      expectRows(output.data.subarray(128 * E), 128, rows - 128, E, -1, 'flash');
      const cache = mha.createKVCache({ batchSize: 1, maxLength: rows });
      const head = { data: x.data.slice(0, prefill * E), shape: [prefill, 1, E] };
      await mha.forward(head, head, head, { cache, isCausal: true, needWeights: false });
      for (let i = prefill; i < rows; i++) {
        const t = stepOf(x, i);
        expectRows((await mha.forward(t, t, t, { cache, needWeights: false })).output.data, i, 1, E, -1,
          'decode step');
      }
      cache.dispose();
      mha.dispose();
    });
  });
}

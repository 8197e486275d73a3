// The GEMM register tile inside WebAssembly: the one chosen at load for this
// host, named by lib.info. The binding has no hook to force another (a test
// hook does not ship): every tile runs against every PyTorch fixture on
// every native Highway target in tests/native/mha_fixture_test.cc
// (EveryGemmTileMatchesPyTorch) and against a reference GEMM, tails included,
// in tests/native/kernels_test.cc; in WebAssembly the chosen tile runs every
// fixture in fixtures.test.js.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';

const TILES = ['4x2v', '6x2v', '8x2v'];

describe('GEMM tiles', () => {
  test('lib.info names the tile chosen for the host: 4x2v on x86, 8x2v on ARM', async () => {
    const lib = await loadMHA({ build: 'simd' });
    const expected = { x64: '4x2v', ia32: '4x2v', arm64: '8x2v', arm: '8x2v' }[process.arch];
    if (expected) assert.equal(lib.info.gemmTile, expected);
    assert.ok(TILES.includes(lib.info.gemmTile), lib.info.gemmTile);
  });

  for (const build of BUILDS) {
    test(`${build}: no test hook to force a tile ships`, async () => {
      const lib = await loadMHA({ build });
      assert.equal(lib.wasm.setGemmTileRows, undefined);
    });
  }
});

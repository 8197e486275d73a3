// The GEMM register tiles inside WebAssembly: the one chosen at load for this
// host, and every tile the binary ships (forced through the core's test hook)
// against the committed PyTorch fixtures.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import {
  assertMatchesFixture, fixtureNames, loadFixture, runFixture,
} from './helpers/fixtures.js';

const fixtures = fixtureNames().map(loadFixture);
const TILES = { 4: '4x2v', 6: '6x2v', 8: '8x2v' };

describe('GEMM tiles', () => {
  test('lib.info names the tile chosen for the host: 4x2v on x86, 8x2v on ARM', async () => {
    const lib = await loadMHA({ build: 'simd' });
    const expected = { x64: '4x2v', ia32: '4x2v', arm64: '8x2v', arm: '8x2v' }[process.arch];
    if (expected) assert.equal(lib.info.gemmTile, expected);
    assert.ok(Object.values(TILES).includes(lib.info.gemmTile), lib.info.gemmTile);
  });

  for (const build of BUILDS) {
    for (const [rows, name] of Object.entries(TILES)) {
      test(`${build}: tile ${name} matches every fixture`, async () => {
        const lib = await loadMHA({ build });
        lib.wasm.setGemmTileRows(Number(rows));
        try {
          for (const fixture of fixtures) {
            assertMatchesFixture(await runFixture(lib, fixture), fixture);
          }
        } finally {
          lib.wasm.setGemmTileRows(0);
        }
      });
    }
  }
});

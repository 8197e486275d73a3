// The GEMM register tiles inside WebAssembly: the one chosen at load for this
// host, named by lib.info, and every tile the kernels ship against the
// reference GEMM (tails included) in a test-only WebAssembly program
// (tests/wasm/kernel_check.cc, built by build_wasm.sh, never in dist/): the
// binding has no hook to force a tile. Natively every tile also runs every
// PyTorch fixture on every Highway target (tests/native/mha_fixture_test.cc);
// in WebAssembly the chosen tile runs every fixture in fixtures.test.js.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { wasmOf } from '../../web/src/library.js';
import { BUILDS } from './helpers/builds.js';

const TILES = ['2x4v', '4x2v', '6x2v', '8x2v'];

describe('GEMM tiles', () => {
  test('lib.info names the tile chosen for the host: 2x4v on x86, 8x2v on ARM', async () => {
    const lib = await loadMHA({ build: 'simd' });
    const expected = { x64: '2x4v', ia32: '2x4v', arm64: '8x2v', arm: '8x2v' }[process.arch];
    if (expected) assert.equal(lib.info.gemmTile, expected);
    assert.ok(TILES.includes(lib.info.gemmTile), lib.info.gemmTile);
  });

  test('every tile matches the reference GEMM in WebAssembly', () => {
    const program = fileURLToPath(new URL('../../build/wasm-simd/kernel_check.cjs', import.meta.url));
    const lines = execFileSync(process.execPath, [program], { encoding: 'utf8' }).trim().split('\n');
    const results = lines.map((line) => JSON.parse(line));
    assert.deepEqual(results.map((r) => r.tile), TILES);
    for (const r of results) {
      assert.equal(r.target, 'WASM');
      assert.equal(r.error, '', `${r.tile}: ${r.error}`);
    }
  });

  for (const build of BUILDS) {
    test(`${build}: no test hook to force a tile ships`, async () => {
      const lib = await loadMHA({ build });
      assert.equal(wasmOf(lib).setGemmTileRows, undefined);
    });
  }
});

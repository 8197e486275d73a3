// The relaxed-SIMD build: its .wasm really holds relaxed-SIMD instructions,
// it is chosen only where the engine validates them, and asking for it
// elsewhere is a clear error. (Its results: fixtures.test.js runs every
// fixture on it when this Node has relaxed SIMD; scripts/test.sh runs that
// suite again with --experimental-wasm-relaxed-simd.)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { relaxedSimdSupported } from '../../web/src/load.js';

const dist = (name) => readFileSync(new URL(`../../dist/${name}`, import.meta.url));

test('the relaxed build validates exactly where the relaxed-SIMD probe does', () => {
  // Without relaxed SIMD in the engine it must fail to validate: proof that
  // scripts/relax_wasm.mjs put f32x4.relaxed_madd in.
  assert.equal(WebAssembly.validate(dist('mha-relaxed-simd-threaded.wasm')), relaxedSimdSupported());
  assert.equal(WebAssembly.validate(dist('mha-simd-threaded.wasm')), true);
});

test('the relaxed build imports what the threaded build imports, nothing more',
  { skip: !relaxedSimdSupported() && 'this engine cannot compile relaxed SIMD' }, () => {
  const imports = (name) => WebAssembly.Module.imports(new WebAssembly.Module(dist(name))).length;
  assert.equal(imports('mha-relaxed-simd-threaded.wasm'), imports('mha-simd-threaded.wasm'));
});

test('asking for the relaxed build where the engine lacks relaxed SIMD is an MHAError', async () => {
  if (relaxedSimdSupported()) {
    assert.equal((await loadMHA({ build: 'relaxed-simd-threaded' })).info.build,
      'relaxed-simd-threaded');
  } else {
    await assert.rejects(loadMHA({ build: 'relaxed-simd-threaded' }),
      (e) => e instanceof MHAError && /build: expected an engine with relaxed SIMD/.test(e.message));
  }
});

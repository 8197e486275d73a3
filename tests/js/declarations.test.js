// web/index.d.ts against the runtime: LibraryInfo names exactly what
// lib.info holds (and `simd`, always true, says so), the default build the
// declarations document is the one loadMHA picks, and the options that
// take null at run time are declared so. (package.test.js compiles
// tests/js/types/usage.ts against the declarations.)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { relaxedSimdSupported } from '../../web/src/load.js';
import { BUILDS } from './helpers/builds.js';

const declarations = readFileSync(new URL('../../web/index.d.ts', import.meta.url), 'utf8');

// The body of `export interface name { ... }`: its fields as {name: type}.
function fields(name) {
  const body = declarations.match(new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`))[1];
  const uncommented = body.replace(/\/\*\*[\s\S]*?\*\//g, '');
  return Object.fromEntries([...uncommented.matchAll(/^\s+(\w+)\??: ([^;]+);/gm)]
    .map(([, field, type]) => [field, type]));
}

test('LibraryInfo declares exactly the fields of lib.info, simd as true', async () => {
  const declared = fields('LibraryInfo');
  for (const build of BUILDS) {
    const { info } = await loadMHA({ build });
    assert.deepEqual(Object.keys(declared).sort(), Object.keys(info).sort(), build);
    assert.equal(info.simd, true, build);
  }
  assert.equal(declared.simd, 'true');
});

test('the documented default build is the one loadMHA picks', async () => {
  const comment = declarations.match(/(\/\*\*(?:(?!\*\/)[\s\S])*\*\/)\s*build\?: BuildName;/)[1]
    .replace(/\s*\*\s*/g, ' ');
  const picked = (await loadMHA()).info.build;
  const expected = relaxedSimdSupported() ? 'relaxed-simd-threaded' : 'simd-threaded';
  assert.equal(picked, expected);
  assert.match(comment, /'relaxed-simd-threaded' when the engine has relaxed SIMD, else 'simd-threaded'/);
});

test('cache: null is accepted and declared so', async () => {
  for (const name of ['ForwardOptions', 'SdpaOptions']) {
    assert.match(fields(name).cache, /\| null$/, name);
  }
  const lib = await loadMHA({ build: 'simd' });
  const x = { data: new Float32Array(16), shape: [1, 2, 8] };
  const mha = lib.createMultiheadAttention({ embedDim: 8, numHeads: 2 });
  await mha.loadStateDict(Object.fromEntries(mha.parameters.map(({ name, shape }) =>
    [name, new Float32Array(shape.reduce((a, b) => a * b, 1))])));
  await mha.forward(x, x, x, { cache: null });
  await lib.scaledDotProductAttention({ data: x.data, shape: [1, 1, 2, 8] },
    { data: x.data, shape: [1, 1, 2, 8] }, { data: x.data, shape: [1, 1, 2, 8] }, { cache: null });
  mha.dispose();
});

// Turns a relaxed-SIMD build's placeholder import into the instruction:
//   node scripts/relax_wasm.mjs <in.wasm> <out.wasm>
//
// The kernels of the MHA_WASM_RELAXED_SIMD build call env.mha_relaxed_madd
// (src/kernels/mul_add-inl.h). Emscripten 3.1.6 cannot emit relaxed SIMD
// itself: its binaryen (108) rejects the opcodes after linking. So it links a
// call to an import, and this script, with a current binaryen (the npm
// package, pinned in package-lock.json), merges in a one-instruction function
// (f32x4.relaxed_madd) under that import's name and inlines it everywhere.
// The import's minified name is found by its signature, (v128 x 3) -> v128,
// which no other import has. Fails loudly when the result still imports it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createRequire } from 'node:module';
import binaryen from 'binaryen';

// The features Emscripten 3.1.6's output uses, plus relaxed SIMD; nothing
// newer, so the result loads wherever relaxed SIMD does.
const FEATURES = ['--mvp-features', '--enable-threads', '--enable-simd', '--enable-relaxed-simd',
  '--enable-bulk-memory', '--enable-sign-ext', '--enable-mutable-globals',
  '--enable-nontrapping-float-to-int'];

const binDir = join(dirname(createRequire(import.meta.url).resolve('binaryen/package.json')), 'bin');
const tool = (name, args) => execFileSync(join(binDir, name), args, { stdio: 'inherit' });

function placeholderImports(bytes) {
  const module = binaryen.readBinary(bytes);
  const v128x3 = binaryen.createType([binaryen.v128, binaryen.v128, binaryen.v128]);
  const found = [];
  for (let i = 0; i < module.getNumFunctions(); ++i) {
    const info = binaryen.getFunctionInfo(module.getFunctionByIndex(i));
    if (info.module && info.params === v128x3 && info.results === binaryen.v128) {
      found.push({ module: info.module, base: info.base });
    }
  }
  module.dispose();
  return found;
}

const [input, output] = process.argv.slice(2);
if (!input || !output) {
  console.error('usage: node scripts/relax_wasm.mjs <in.wasm> <out.wasm>');
  process.exit(2);
}
const found = placeholderImports(readFileSync(input));
if (found.length !== 1) {
  console.error(`relax_wasm: expected one (v128, v128, v128) -> v128 import in ${input}, ` +
                `found ${found.length}`);
  process.exit(1);
}
const [{ module: importModule, base }] = found;
const work = mkdtempSync(join(tmpdir(), 'relax-wasm-'));
try {
  const wat = join(work, 'madd.wat');
  writeFileSync(wat, `(module (func (export "${base}") (param v128 v128 v128) (result v128)
    (f32x4.relaxed_madd (local.get 0) (local.get 1) (local.get 2))))\n`);
  tool('wasm-as', [...FEATURES, wat, '-o', join(work, 'madd.wasm')]);
  tool('wasm-merge', [...FEATURES, '-g', input, importModule, join(work, 'madd.wasm'), importModule,
    '-o', join(work, 'merged.wasm')]);
  // -g: the input's function names stay (scripts/wasm_function_sizes.mjs reads them).
  tool('wasm-opt', [...FEATURES, '-g', join(work, 'merged.wasm'), '--remove-exports',
    `--pass-arg=remove-exports@${base}`, '--inlining-optimizing', '-O3', '-o', output]);
} finally {
  rmSync(work, { recursive: true, force: true });
}
if (placeholderImports(readFileSync(output)).length !== 0) {
  console.error(`relax_wasm: ${output} still imports the placeholder`);
  process.exit(1);
}

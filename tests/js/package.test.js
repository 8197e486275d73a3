// The package as users get it: `npm pack`, installed offline into an empty
// project in a temp dir, then the README's quickstart and docs/models.md's PyTorch /
// Hugging Face path (save a model in Python, load one layer in JS) run there, and a
// TypeScript usage example compiles against the declarations.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { readSafetensors } from './helpers/safetensors.js';
import { assertClose } from './helpers/fixtures.js';
import { docBlock } from './helpers/docs.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const PYTHON = '/usr/bin/python3';

function run(command, args, cwd) {
  return execFileSync(command, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function hasTorch() {
  try {
    run(PYTHON, ['-c', 'import torch, numpy'], ROOT);
    return true;
  } catch {
    return false;
  }
}

describe('npm pack tarball in an empty project', () => {
  let dir;
  let project;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'mha-wasm-pack-'));
    const tarball = run('npm', ['pack', '--silent', '--pack-destination', dir], ROOT).trim()
      .split('\n').pop();
    project = join(dir, 'project');
    mkdirSync(project);
    writeFileSync(join(project, 'package.json'),
      JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
    run('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, tarball)], project);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  test('ships only the API, the declarations and the three builds', () => {
    const installed = join(project, 'node_modules', 'mha-wasm');
    for (const file of ['web/src/index.js', 'web/src/browser.js', 'web/index.d.ts', 'dist/mha-simd.wasm',
      'dist/mha-simd-threaded.wasm', 'dist/mha-simd-threaded.worker.js', 'dist/mha-proxy-worker.mjs',
      'dist/mha-relaxed-simd-threaded.wasm', 'dist/mha-relaxed-simd-threaded.worker.js',
      'dist/node/mha-simd.mjs', 'dist/node/mha-simd-threaded.mjs',
      'dist/node/mha-relaxed-simd-threaded.mjs']) {
      assert.ok(existsSync(join(installed, file)), `${file} is in the package`);
    }
    assert.ok(!existsSync(join(installed, 'src')), 'no C++ sources in the package');
    assert.ok(!existsSync(join(installed, 'tests')), 'no tests in the package');
  });

  test('what a browser loads names no Node module (only the node condition\'s files do)', () => {
    const installed = join(project, 'node_modules', 'mha-wasm');
    const nodeOnly = ['web/src/index.js', 'web/src/env_node.js', 'web/src/proxy_worker_node.js'];
    const browserFiles = [
      ...readdirSync(join(installed, 'web/src')).map((f) => `web/src/${f}`).filter((f) => !nodeOnly.includes(f)),
      ...readdirSync(join(installed, 'dist')).filter((f) => /\.m?js$/.test(f)).map((f) => `dist/${f}`),
    ];
    assert.ok(browserFiles.includes('dist/mha-simd-threaded.mjs') && browserFiles.includes('web/src/browser.js'));
    for (const file of browserFiles) {
      const text = readFileSync(join(installed, file), 'utf8');
      assert.doesNotMatch(text, /require\(|['"]node:|worker_threads|['"]fs['"]/, file);
    }
    const exports = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')).exports['.'];
    assert.equal(exports.browser.default, './web/src/browser.js');
    assert.equal(exports.default.default, './web/src/browser.js');
    assert.equal(exports.node.default, './web/src/index.js');
  });

  // What a page with a Content-Security-Policy but no 'unsafe-eval' refuses: a call of eval,
  // and the global Function other than after instanceof (called, with new, or handed on as
  // Embind's new_(Function, ...) does), in any script the package ships.
  test('no script in the package evaluates a string', () => {
    const installed = join(project, 'node_modules', 'mha-wasm');
    const scripts = readdirSync(installed, { recursive: true }).filter((f) => /\.[cm]?js$/.test(f));
    assert.ok(scripts.includes('dist/mha-simd.mjs') && scripts.includes('dist/node/mha-simd.mjs'));
    const evaluation = /(?<![\w$.])eval\s*\(|(?<!instanceof\s)(?<![\w$."'`])Function(?![\w$])/g;
    const found = scripts.flatMap((file) => [...readFileSync(join(installed, file), 'utf8').matchAll(evaluation)]
      .map(({ index, input }) => `${file}: ${input.slice(index - 20, index + 40)}`));
    assert.deepEqual(found, []);
  });

  test("README quickstart runs as written with import { loadMHA } from 'mha-wasm'", () => {
    writeFileSync(join(project, 'quickstart.mjs'), docBlock('// quickstart.mjs'));
    const stdout = run('node', ['quickstart.mjs'], project);
    assert.match(stdout, /build: 'simd-threaded'/);
    assert.match(stdout, /target: 'WASM'/);
    assert.match(stdout, /\[ 5, 1, 8 \] \[ 1, 5, 5 \]/);
  });

  test("docs/getting-started.md's node_proxy.mjs runs from the installed package (proxy: true in Node)", () => {
    writeFileSync(join(project, 'node_proxy.mjs'), docBlock('// node_proxy.mjs'));
    assert.equal(run('node', ['node_proxy.mjs'], project), 'true\n[ 2048, 1, 64 ]\ntrue\n');
  });

  test('docs/models.md: a model saved with the three lines of Python, one layer loaded in JS, matches PyTorch',
    { skip: !hasTorch() && 'no torch' }, async () => {
      // A BERT-style model of four layers (the generator's module), the guide's
      // three lines, then PyTorch's output of layer 3's attention on the guide's input.
      symlinkSync(ROOT, join(project, 'mha-wasm'));
      const model = 'import sys; sys.path.insert(0, "mha-wasm/tests/fixtures")\n' +
        'import torch\n' +
        'from hf_modules import BertAttention\n' +
        'from layout_fixtures import attach, init_params\n' +
        'model = torch.nn.Module()\n' +
        'for i in range(4):\n' +
        '    attach(model, f"bert.encoder.layer.{i}.attention", BertAttention(768, 12))\n' +
        'init_params(model)\n';
      const check = 'from safetensors_writer import write_safetensors\n' +
        'x = torch.full((1, 7, 768), 0.5)\n' +
        'with torch.no_grad():\n' +
        '    y = model.get_submodule("bert.encoder.layer.3.attention")(x, x, x)\n' +
        'write_safetensors("check.safetensors", {"y": ("F32", y)})\n';
      writeFileSync(join(project, 'save_model.py'), model + docBlock('# save_model.py') + check);
      run(PYTHON, ['save_model.py'], project);

      writeFileSync(join(project, 'load_layer.mjs'), docBlock('// load_layer.mjs'));
      const stdout = run('node', ['load_layer.mjs'], project);
      assert.match(stdout, /bert\.encoder\.layer\.3\.attention\./);
      assert.match(stdout, /\[ 1, 7, 768 \]/);

      // The same layer, its output against PyTorch's.
      const { loadMHA } = await import(join(project, 'node_modules/mha-wasm/web/src/index.js'));
      const lib = await loadMHA();
      const mha = lib.createMultiheadAttention({ embedDim: 768, numHeads: 12, batchFirst: true });
      await mha.loadSafetensors(readFileSync(join(project, 'model.safetensors')),
        { prefix: 'bert.encoder.layer.3.attention.' });
      const x = { data: new Float32Array(7 * 768).fill(0.5), shape: [1, 7, 768] };
      const { output } = await mha.forward(x, x, x, { needWeights: false });
      const { tensors } = readSafetensors(readFileSync(join(project, 'check.safetensors')));
      assertClose(output, tensors.y, 'README model, layer 3');
      mha.dispose();
    });

  // moduleResolution bundler resolves the "browser"/"default" condition's types, node16 and
  // nodenext the "node" one's.
  for (const [module, moduleResolution] of [['esnext', 'bundler'], ['node16', 'node16'], ['nodenext', 'nodenext']]) {
    test(`tsc --noEmit --strict (moduleResolution ${moduleResolution}) accepts the usage example and rejects misuse`, () => {
      writeFileSync(join(project, 'usage.ts'),
        readFileSync(new URL('./types/usage.ts', import.meta.url)));
      writeFileSync(join(project, 'tsconfig.json'), JSON.stringify({
        compilerOptions: {
          strict: true, noEmit: true, target: 'es2022', module, moduleResolution, lib: ['es2022', 'dom'],
        },
        files: ['usage.ts'],
      }));
      const tsc = join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
      try {
        run('node', [tsc, '-p', 'tsconfig.json'], project);
      } catch (error) {
        assert.fail(`tsc failed:\n${error.stdout}${error.stderr}`);
      }
    });
  }

  // require() of an ES module: Node >= 20.19 (and 22.12) loads it; older Node stops with
  // ERR_REQUIRE_ESM, which says to use import().
  test('require() works where Node can require ES modules, else fails with ERR_REQUIRE_ESM', () => {
    writeFileSync(join(project, 'required.cjs'), "const { loadMHA } = require('mha-wasm');\n" +
      'loadMHA().then((lib) => console.log(lib.info.build));\n');
    const [major, minor] = process.versions.node.split('.').map(Number);
    const canRequireEsm = major > 22 || (major === 22 && minor >= 12) || (major === 20 && minor >= 19);
    if (canRequireEsm) {
      assert.match(run('node', ['required.cjs'], project), /simd-threaded/);
    } else {
      assert.throws(() => run('node', ['required.cjs'], project), (error) => /ERR_REQUIRE_ESM/.test(error.stderr));
    }
  });

  test('a Node import loads the Node build: no fetch, files read from the package', () => {
    writeFileSync(join(project, 'nofetch.mjs'), "globalThis.fetch = () => { throw new Error('fetched'); };\n" +
      "const { loadMHA } = await import('mha-wasm');\n" +
      'for (const build of ["simd-threaded", "simd"]) console.log((await loadMHA({ build })).info.build);\n');
    assert.equal(run('node', ['nofetch.mjs'], project), 'simd-threaded\nsimd\n');
  });
});

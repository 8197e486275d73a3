// The README's and the guides' runnable examples type-check under `tsc --strict` against
// web/index.d.ts (issue 35 item 8): each as JavaScript checked by TypeScript (checkJs, as an
// editor's // @ts-check does; their helpers' parameters carry JSDoc types), and those without
// helper functions as TypeScript too, pasted into a .ts file as they are. So the declarations
// type what the examples do (the README's quickstart reads the weights a forward returns by
// default), and an example that misuses the API fails here before a user's compiler.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { ROOT, docPages } from './helpers/docs.js';

const OUT = join(ROOT, 'build', 'typescript-examples');
const AS_TYPESCRIPT = ['quickstart.mjs', 'load_once.mjs'];

// { name: code } of every runnable example (readme_examples.test.js runs the same blocks).
function examples() {
  return Object.fromEntries(docPages().flatMap(({ text }) =>
    [...text.matchAll(/```js\n(\/\/ ([\w-]+\.mjs)[^\n]*\n[\s\S]*?)```/g)].map(([, code, name]) => [name, code])));
}

// tsc's output for `files` under --strict, 'mha-wasm' resolving to web/index.d.ts; '' when clean.
function typeCheck(files) {
  const tsconfig = {
    compilerOptions: {
      strict: true, noEmit: true, allowJs: true, checkJs: true, target: 'es2022', module: 'esnext',
      moduleResolution: 'bundler', lib: ['es2022', 'dom'], types: ['node'],
      typeRoots: [join(ROOT, 'node_modules', '@types')],
      paths: { 'mha-wasm': [join(ROOT, 'web', 'index.d.ts')] },
    },
    files,
  };
  writeFileSync(join(OUT, 'tsconfig.json'), JSON.stringify(tsconfig));
  try {
    execFileSync('node', [join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'],
      { cwd: OUT, encoding: 'utf8' });
    return '';
  } catch (error) {
    return `${error.stdout}${error.stderr}`;
  }
}

test('the examples type-check under tsc --strict, as JavaScript and (those without helpers) as TypeScript', () => {
  rmSync(OUT, { recursive: true, force: true });
  mkdirSync(OUT, { recursive: true });
  const files = [];
  for (const [name, code] of Object.entries(examples())) {
    writeFileSync(join(OUT, name), code);
    files.push(name);
    if (AS_TYPESCRIPT.includes(name)) {
      const ts = name.replace(/\.mjs$/, '.mts');
      writeFileSync(join(OUT, ts), code);
      files.push(ts);
    }
  }
  for (const name of AS_TYPESCRIPT) assert.ok(files.includes(name), `no example ${name}`);
  assert.equal(typeCheck(files), '');
});

// The README and the guides tell the truth: the README's benchmark summary is made from
// bench/RESULTS.md; the JavaScript examples of README.md and of every docs/*.md page run as
// written: each ```js block whose first line names a file (`// quickstart.mjs ...`) is written into
// the repository (so that `import 'mha-wasm'` resolves to this package by its own name) and run
// with Node; what its comments print (`console.log(x);   // 16: ...`) is checked against what it
// printed; and every relative link between the pages points at a file (and a heading) that exists.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { test } from 'node:test';
import { summary, withSummary } from '../../bench/lib/readme_summary.mjs';
import { ROOT, docPages } from './helpers/docs.js';

const OUT = join(ROOT, 'build', 'readme-examples');

// Examples that need what a test machine has not got, with the reason.
const NOT_RUN = {
  'load_layer.mjs': 'reads a Hugging Face checkpoint (bert-base-uncased) from disk',
};

// [{ page, name, code }] of every runnable example, in page order.
function examples() {
  return docPages().flatMap(({ file, text }) =>
    [...text.matchAll(/```js\n(\/\/ ([\w-]+\.mjs)[^\n]*\n[\s\S]*?)```/g)]
      .map(([, code, name]) => ({ page: file, name, code })));
}

// The lines a block's `console.log(...);  // value` statements promise, in order: the comment's
// text up to a colon or the end, with single spaces (objects, which print on several lines, are
// not promised: their comments start with '{').
const squeeze = (text) => text.trim().replace(/\s+/g, ' ');
function promised(code) {
  return [...code.matchAll(/^\s*console\.log\([^\n]*\);\s*\/\/ ([^\n]*)$/gm)]
    .map(([, comment]) => squeeze(comment.split(':')[0]))
    .filter((value) => !value.startsWith('{'));
}

test("the README's benchmark summary is the one bench/RESULTS.md gives", () => {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const text = summary(readFileSync(join(ROOT, 'bench', 'RESULTS.md'), 'utf8'));
  assert.equal(readme, withSummary(readme, text),
    'README.md is stale: run node bench/lib/readme_summary.mjs --write');
});

test('the README and the guides have the examples this test knows, each name once', () => {
  const found = examples().map(({ page, name }) => `${page}: ${name}`);
  for (const expected of ['README.md: quickstart.mjs', 'docs/getting-started.md: masks.mjs',
    'docs/decoding.md: decoding.mjs', 'docs/decoding.md: keep_chat.mjs',
    'docs/generating.md: ragged_batch.mjs',
    'docs/generating.md: beam_search.mjs', 'docs/generating.md: rolling_chat.mjs',
    'docs/generating.md: streaming_chat.mjs',
    'docs/models.md: load_layer.mjs', 'docs/precision.md: precision.mjs']) {
    assert.ok(found.includes(expected), `no example ${expected}; found:\n${found.join('\n')}`);
  }
  const names = examples().map(({ name }) => name);
  assert.deepEqual(names.filter((name, i) => names.indexOf(name) !== i), [], 'example names repeat');
});

// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
const anchor = (heading) => heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '')
  .replace(/\s/g, '-');
const withoutBlocks = (text) => text.replace(/```[\s\S]*?```/g, '');
const withoutCode = (text) => withoutBlocks(text).replace(/`[^`\n]*`/g, '');
// A page's anchors: a heading's, and '-1', '-2'... after it for the same heading again (as GitHub).
function anchors(text) {
  const seen = new Map();
  return new Set(withoutBlocks(text).split('\n').filter((line) => /^#{1,6} /.test(line)).map((line) => {
    const base = anchor(line.replace(/^#+ /, ''));
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    return count === 0 ? base : `${base}-${count}`;
  }));
}

test('every relative link of the README and the guides points at a file and heading that exist', () => {
  const broken = [];
  let links = 0;
  for (const { file, text } of docPages()) {
    for (const [, target] of withoutCode(text).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z]+:/.test(target)) continue;   // https:, mailto:
      links++;
      const [path, hash] = target.split('#');
      const full = path ? normalize(join(ROOT, dirname(file), path)) : join(ROOT, file);
      if (!existsSync(full)) broken.push(`${file}: ${target} (no such file)`);
      else if (hash && full.endsWith('.md') && !anchors(readFileSync(full, 'utf8')).has(hash)) {
        broken.push(`${file}: ${target} (no such heading)`);
      }
    }
  }
  assert.ok(links >= 20, `found ${links} relative links`);
  assert.deepEqual(broken, []);
});

for (const { page, name, code } of examples()) {
  if (name in NOT_RUN) {
    test(`${page} example ${name}`, { skip: NOT_RUN[name] }, () => {});
    continue;
  }
  test(`${page} example ${name} runs and prints what it says`, () => {
    mkdirSync(OUT, { recursive: true });
    const file = join(OUT, name);
    writeFileSync(file, code);
    const printed = execFileSync(process.execPath, [file], { encoding: 'utf8', timeout: 120_000 })
      .trim().split('\n');
    const expected = promised(code);
    // Each promised value is one printed line, in order.
    let at = 0;
    for (const value of expected) {
      const found = printed.findIndex((line, i) => i >= at && squeeze(line) === value);
      assert.ok(found >= 0, `${name}: expected a line ${JSON.stringify(value)} after line ${at}, ` +
                            `printed:\n${printed.join('\n')}`);
      at = found + 1;
    }
  });
}

// The README tells the truth: its benchmark summary is made from bench/RESULTS.md, and its
// JavaScript examples run as written: each ```js block whose first line names a
// file (`// quickstart.mjs ...`) is written into the repository (so that `import 'mha-wasm'`
// resolves to this package by its own name) and run with Node; what its comments print
// (`console.log(x);   // 16: ...`) is checked against what it printed.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { summary, withSummary } from '../../bench/lib/readme_summary.mjs';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OUT = join(ROOT, 'build', 'readme-examples');

// Examples that need what a test machine has not got, with the reason.
const NOT_RUN = {
  'load_layer.mjs': 'reads a Hugging Face checkpoint (bert-base-uncased) from disk',
};

function examples() {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  return [...readme.matchAll(/```js\n(\/\/ ([\w-]+\.mjs)[^\n]*\n[\s\S]*?)```/g)]
    .map(([, code, name]) => ({ name, code }));
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

test('the README has the examples this test knows', () => {
  const names = examples().map((e) => e.name);
  for (const name of ['quickstart.mjs', 'decoding.mjs', 'beam_search.mjs', 'ragged_batch.mjs',
    'rolling_chat.mjs', ...Object.keys(NOT_RUN)]) {
    assert.ok(names.includes(name), `README.md has no example ${name}`);
  }
});

for (const { name, code } of examples()) {
  if (name in NOT_RUN) {
    test(`README example ${name}`, { skip: NOT_RUN[name] }, () => {});
    continue;
  }
  test(`README example ${name} runs and prints what it says`, () => {
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

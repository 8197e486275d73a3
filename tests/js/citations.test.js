// Every citation of the design in the sources, tests and docs names a section docs/design.md has:
// `docs/design.md, "<section>"` (or `docs/design.md ("<section>"`), where the quoted text may run
// over comment lines and may be the start of the section's heading.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname;
const SKIP = new Set(['node_modules', 'build', 'dist', '.git', 'test-results']);
const SELF = new URL(import.meta.url).pathname;
const EXTENSIONS = /\.(h|cc|js|mjs|ts|py|md|sh|json)$/;

function* files(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (SKIP.has(entry.name)) continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) yield* files(full);
    else if (EXTENSIONS.test(entry.name) && full !== SELF) yield full;
  }
}

const normalize = (text) => text.replace(/\n\s*(\/\/|#|\*|>)?\s*/g, ' ').replace(/\s+/g, ' ').trim();

const headings = fs.readFileSync(path.join(ROOT, 'docs/design.md'), 'utf8').split('\n')
  .filter((line) => /^#{2,3} /.test(line)).map((line) => normalize(line.replace(/^#+ /, '')));

// [{ file, line, section }] of every citation with a section.
function citations() {
  const found = [];
  for (const file of files(ROOT)) {
    const text = fs.readFileSync(file, 'utf8');
    for (const match of text.matchAll(/docs\/design\.md,? \(?"([^"]{1,200})"/g)) {
      found.push({
        file: path.relative(ROOT, file),
        line: text.slice(0, match.index).split('\n').length,
        section: normalize(match[1]),
      });
    }
  }
  return found;
}

test('the design is in the repository and nothing cites the old DESIGN.md', () => {
  assert.ok(headings.length > 5);
  const stale = [...files(ROOT)].filter((file) => /(^|[^/\w])DESIGN\.md/.test(fs.readFileSync(file, 'utf8')));
  assert.deepEqual(stale.map((file) => path.relative(ROOT, file)), []);
});

test('every cited section of docs/design.md exists', () => {
  const list = citations();
  assert.ok(list.length >= 20, `found ${list.length} citations`);
  const missing = list.filter(({ section }) => section !== '<section>' && !headings.some((h) => h.startsWith(section)));
  assert.deepEqual(missing.map(({ file, line, section }) => `${file}:${line} "${section}"`), []);
});

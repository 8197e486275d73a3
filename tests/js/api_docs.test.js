// The API reference (docs/api.md) is TypeDoc's page of web/index.d.ts as it is now, and TypeDoc
// refuses a declaration without a doc comment (scripts/api_docs.mjs); its links are checked with
// the guides' in readme_examples.test.js.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { apiPage } from '../../scripts/api_docs.mjs';
import { ROOT } from './helpers/docs.js';

test('docs/api.md is what TypeDoc makes of web/index.d.ts', () => {
  const { ok, log, page } = apiPage();
  assert.ok(ok, log);
  assert.equal(readFileSync(join(ROOT, 'docs', 'api.md'), 'utf8'), page,
    'docs/api.md is stale: run node scripts/api_docs.mjs');
});

test('an export without a doc comment fails the build of the reference, naming it', (t) => {
  const types = readFileSync(join(ROOT, 'web', 'index.d.ts'), 'utf8');
  const stripped = types.replace(/\/\*\* What \{@link MHALibrary\.heapInfo\} resolves to\. \*\/\n/, '');
  assert.notEqual(stripped, types);
  const dir = mkdtempSync(join(tmpdir(), 'mha-types-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const entry = join(dir, 'index.d.ts');
  writeFileSync(entry, stripped);
  const { ok, log } = apiPage(entry);
  assert.equal(ok, false);
  assert.match(log, /HeapInfo .*does not have any documentation/);
});

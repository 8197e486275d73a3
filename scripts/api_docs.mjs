// docs/api.md, the API reference: TypeDoc's Markdown page of web/index.d.ts (typedoc.json says
// how). TypeDoc fails on an export without a doc comment and on a {@link} to nothing, so the page
// documents every export; its relative links are checked with the guides' (readme_examples.test.js).
//   node scripts/api_docs.mjs           writes docs/api.md
//   node scripts/api_docs.mjs --check   fails when docs/api.md is not what web/index.d.ts gives
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const PAGE = join(ROOT, 'docs', 'api.md');

// TypeDoc over `entry` (default web/index.d.ts): { ok, log, page } with page the Markdown text.
export function apiPage(entry = join(ROOT, 'web', 'index.d.ts')) {
  const out = mkdtempSync(join(tmpdir(), 'mha-api-'));
  try {
    const run = spawnSync(process.execPath, [join(ROOT, 'node_modules', 'typedoc', 'bin', 'typedoc'),
      '--options', join(ROOT, 'typedoc.json'), '--entryPoints', entry, '--out', out],
    { cwd: ROOT, encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
    const file = join(out, 'api.md');
    const ok = run.status === 0 && existsSync(file);
    return { ok, log: run.stdout + run.stderr, page: ok ? readFileSync(file, 'utf8') : null };
  } finally {
    rmSync(out, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { ok, log, page } = apiPage();
  if (!ok) {
    console.error(log);
    process.exit(1);
  }
  if (process.argv.includes('--check')) {
    if (!existsSync(PAGE) || readFileSync(PAGE, 'utf8') !== page) {
      console.error('docs/api.md is stale: run node scripts/api_docs.mjs');
      process.exit(1);
    }
  } else {
    writeFileSync(PAGE, page);
  }
}

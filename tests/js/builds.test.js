// The builds' one table (web/src/builds.js) and what must agree with it: the URLs that
// env_browser.js writes out by hand for bundlers, the BuildName type of web/index.d.ts, and
// dist/ (scripts/build_wasm.sh builds from the table).
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { BUILDS, BUILD_NAMES } from '../../web/src/builds.js';
import { fileUrls as browserFiles } from '../../web/src/env_browser.js';
import { fileUrls as nodeFiles } from '../../web/src/env_node.js';

const DIST = new URL('../../dist/', import.meta.url);

test("env_browser.js's URLs written out for bundlers are the table's", () => {
  assert.deepEqual(browserFiles(), browserFiles(DIST));
});

test("index.d.ts's BuildName is the table's names", () => {
  const declared = readFileSync(new URL('../../web/index.d.ts', import.meta.url), 'utf8')
    .match(/export type BuildName = ([^;]+);/)[1].split('|').map((name) => name.trim().slice(1, -1));
  assert.deepEqual(declared.sort(), [...BUILD_NAMES].sort());
});

test('dist/ holds every build of the table, for browsers and for Node', () => {
  const { proxyWorker, ...builds } = browserFiles();
  const files = [proxyWorker, ...Object.values(builds), ...Object.values(nodeFiles())]
    .flatMap((f) => (typeof f === 'string' ? [f] : Object.values(f)));
  const threaded = Object.values(BUILDS).filter((build) => build.threads).length;
  assert.equal(files.length, 1 + 2 * (2 * BUILD_NAMES.length + threaded));
  for (const file of files) assert.ok(existsSync(fileURLToPath(file)), String(file));
});

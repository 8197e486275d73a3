// The package in a Chrome extension page (Manifest V3): the `npm pack` tarball's files unpacked
// into an extension (tests/e2e/extension/manifest.json: the extension pages' policy
// "script-src 'self' 'wasm-unsafe-eval'; object-src 'self'", whose worker-src is script-src's
// 'self', no blob:, and cross-origin isolation), loaded with --load-extension into headless
// Chromium. Its page (pages/csp.html) loads the package in its thread and through the proxy, with
// threads, runs a forward and decodes; no violation may be heard. Chromium only (driven by
// playwright: the harness's agent, a script of another origin, cannot run in an extension page).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { chromium } from 'playwright-core';
import { BROWSERS, CHROMIUM, CHROMIUM_ARGS, browserNames } from './driver/browsers.mjs';
import { ROOT, expectedBuild } from './harness.mjs';

const SKIP = !browserNames().includes('chromium') && 'E2E_BROWSERS has no chromium';
const RUN_TIMEOUT_MS = 180_000;

// Chrome's id of an unpacked extension: its folder's SHA-256, the first 32 hex digits as a-p.
const extensionId = (dir) => [...createHash('sha256').update(dir).digest('hex').slice(0, 32)]
  .map((digit) => String.fromCharCode(97 + parseInt(digit, 16))).join('');

let dir;
let context;
before(async () => {
  if (SKIP) return;
  dir = mkdtempSync(join(tmpdir(), 'mha-wasm-extension-'));
  const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8' })
    .trim().split('\n').pop();
  const extension = join(dir, 'extension');
  mkdirSync(extension);
  execFileSync('tar', ['-xzf', join(dir, tarball), '-C', extension, '--strip-components=1', 'package/web', 'package/dist']);
  rmSync(join(extension, 'dist/node'), { recursive: true });
  cpSync(join(ROOT, 'tests/e2e/extension/manifest.json'), join(extension, 'manifest.json'));
  for (const file of ['csp.html', 'csp.js']) cpSync(join(ROOT, 'tests/e2e/pages', file), join(extension, file));
  context = await chromium.launchPersistentContext(join(dir, 'profile'), {
    executablePath: CHROMIUM, headless: true, ignoreDefaultArgs: ['--disable-extensions'],
    args: [...CHROMIUM_ARGS, `--disable-extensions-except=${extension}`, `--load-extension=${extension}`],
  });
  context.extensionUrl = `chrome-extension://${extensionId(extension)}/`;
});

after(async () => {
  await context?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('an extension page: loads with threads, forwards and decodes in the thread and through the proxy',
  { skip: SKIP, timeout: RUN_TIMEOUT_MS }, async () => {
    const page = context.pages()[0] ?? await context.newPage();
    const errors = [];
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
    await page.goto(`${context.extensionUrl}csp.html`);
    const result = await page.evaluate(async () => ({ ...(await window.cspTest.result), violations: window.cspTest.violations }));
    const { build } = expectedBuild(BROWSERS.chromium, true);
    assert.deepEqual(result.runs.map((run) => [run.proxy, run.error, run.info?.proxy, run.info?.build, run.info?.threadsOffReason]),
      [[false, undefined, false, build, null], [true, undefined, true, build, null]]);
    for (const run of result.runs) {
      assert.ok(run.outputFinite && run.decodeError < 1e-4, `proxy ${run.proxy}: decoding differs by ${run.decodeError}`);
    }
    assert.deepEqual(result.violations, []);
    assert.deepEqual(errors, []);
  });

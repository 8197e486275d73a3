// The package as web developers get it: the `npm pack` tarball installed into a small app
// (tests/e2e/app), built by Vite 8 (build and dev server), webpack 5, Rollup 4 and esbuild, each
// served to each browser cross-origin isolated and not. Each page must load the build the browser
// and its isolation allow (with the proxy, threads where they are possible), reproduce a PyTorch
// fixture, and keep its main thread running during a forward of a few hundred milliseconds.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertMatchesFixture, loadFixture, moduleConfig } from '../js/helpers/fixtures.js';
import { BUNDLERS } from './bundle_app.mjs';
import { ROOT, expectedBuild, forEachBrowser, recordBrowserInfo } from './harness.mjs';

const FIXTURE = loadFixture('e16_h2_l7_bool_kpm.safetensors');

function fixtureRequest(fixture) {
  const input = (name) => {
    const t = fixture.tensors[`input.${name}`];
    return t && { data: Array.from(t.data), shape: t.shape, bool: t.dtype === 'BOOL' };
  };
  const c = fixture.config;
  return {
    config: moduleConfig(c),
    bytes: Array.from(fixture.bytes),
    inputs: { query: input('query'), key: input('key'), value: input('value'), keyPaddingMask: input('key_padding_mask') },
    options: { needWeights: c.need_weights, averageAttnWeights: c.average_attn_weights },
  };
}

const tensor = (plain) => plain && { data: Float32Array.from(plain.data), shape: plain.shape };

let dir;
let app;
const outs = {};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mha-wasm-bundlers-'));
  const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', dir], { cwd: ROOT, encoding: 'utf8' })
    .trim().split('\n').pop();
  app = join(dir, 'app');
  mkdirSync(app);
  cpSync(join(ROOT, 'tests/e2e/app'), app, { recursive: true });
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
  execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', join(dir, tarball)], { cwd: app, stdio: 'ignore' });
  for (const [name, bundler] of Object.entries(BUNDLERS)) outs[name] = await bundler.build(app);
});

after(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

// Vite inlines assets under 4 KiB as data: URLs, from which a Worker does not start (it would take
// a Blob URL, and a Content-Security-Policy's worker-src blob:): the worker scripts are files.
test('Vite build ships the worker scripts as files', () => {
  const assets = readdirSync(join(outs['Vite build'], 'assets'));
  for (const script of ['mha-proxy-worker', 'mha-simd-threaded.worker', 'mha-relaxed-simd-threaded.worker']) {
    assert.ok(assets.some((name) => name.startsWith(`${script}-`)), `${script}: not among ${assets.join(', ')}`);
  }
});

forEachBrowser((ctx) => {
  for (const [name, bundler] of Object.entries(BUNDLERS)) {
    describe(name, () => {
      for (const isolated of [true, false]) {
        test(isolated ? 'cross-origin isolated' : 'not isolated', async (t) => {
          const { browser, page } = ctx;
          const { url, close } = await bundler.serve(app, outs[name], isolated, browser.control.agentTag);
          const since = page.messageCount;
          try {
            await page.goto(url);
            const info = await page.evaluate(async () => (await window.app).info);
            if (name === 'Vite build') recordBrowserInfo(browser, isolated, info);
            assert.equal(info.proxy, true);
            const expected = expectedBuild(ctx.spec, isolated);
            assert.equal(info.build, expected.build);
            const cores = await page.evaluate(() => navigator.hardwareConcurrency);
            assert.equal(info.threads, expected.threadsOffReason ? 1 : Math.min(cores, 4));
            if (expected.threadsOffReason) assert.match(info.threadsOffReason, expected.threadsOffReason);
            else assert.equal(info.threadsOffReason, null);

            const result = await page.evaluate(async (request) => (await window.app).runFixture(request),
              fixtureRequest(FIXTURE));
            assertMatchesFixture({ output: tensor(result.output), weights: tensor(result.weights) }, FIXTURE);

            const { ms, ticks, length } = await page.evaluate(async () => (await window.app).ticksDuringForward());
            t.diagnostic(`${browser.label}, ${name}, ${isolated ? 'isolated' : 'not isolated'}: ${info.build}, ` +
                         `${info.threads} threads, a ${ms.toFixed(0)} ms forward of ${length} tokens, ${ticks} timer ticks meanwhile`);
            assert.ok(ms >= 100, `the forward took ${ms} ms, too short to tell`);
            assert.ok(ticks >= 5, `the page's 10 ms timer fired ${ticks} times during a ${ms} ms forward`);
            assert.deepEqual(page.errors(since), []);
            // One warning when threads are off, naming the headers that turn them on.
            const warnings = page.warnings(since);
            const headerWarnings = warnings.filter((w) => /mha-wasm: running single-threaded/.test(w));
            assert.equal(headerWarnings.length, expected.threadsOffReason ? 1 : 0, warnings.join('\n'));
            if (expected.threadsOffReason) {
              assert.match(headerWarnings[0], /Cross-Origin-Opener-Policy: same-origin.*Cross-Origin-Embedder-Policy: require-corp/);
            }
          } finally {
            await close();
          }
        });
      }
    });
  }
});

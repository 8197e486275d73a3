// Shared set-up for the browser tests: each suite runs once per browser engine (E2E_BROWSERS,
// tests/e2e/driver/browsers.mjs), in a browser launched on a fresh profile and driven by the test
// agent inside its page (driver/agent.js, driver/page.mjs: one page API for every engine); the
// pages are served on a free port with the agent injected; helpers wait for the demo's runs (the
// page reports them on <output id="result">) and record what each engine ran for the README's
// browser table (test-results/browsers/, scripts/browser_table.mjs).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { createStaticServer } from '../../scripts/static_server.mjs';
import { chromium } from 'playwright-core';
import { BROWSERS, CHROMIUM, CHROMIUM_ARGS, browserNames, launch } from './driver/browsers.mjs';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const RESULTS_DIR = join(ROOT, 'test-results');
const RUN_TIMEOUT_MS = 60_000;

// Chromium headless through playwright-core with a fresh profile, for the bench's page rows:
// resolves to { context, close }.
export async function launchBrowser() {
  const profile = mkdtempSync(join(tmpdir(), 'mha-e2e-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport: { width: 1400, height: 1000 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// One describe per browser: `body(ctx)` declares the tests; before them ctx.browser (its
// handle: name, label, spec, version, control) and ctx.page are set, and the browser is closed after.
export function forEachBrowser(body) {
  for (const name of browserNames()) {
    describe(BROWSERS[name].label, () => {
      const ctx = { name, spec: BROWSERS[name] };
      before(async () => {
        ctx.browser = await launch(name);
        ctx.page = ctx.browser.page;
      });
      after(async () => {
        await ctx.browser?.close();
      });
      body(ctx);
    });
  }
}

// The build the package must choose in this browser, isolated or not, and why threads are off.
export function expectedBuild(spec, isolated) {
  if (!isolated) return { build: 'simd', threadsOffReason: /not cross-origin isolated/ };
  if (!spec.sharedArrayBuffer) return { build: 'simd', threadsOffReason: /this browser has no SharedArrayBuffer/ };
  return { build: spec.relaxedSimd ? 'relaxed-simd-threaded' : 'simd-threaded', threadsOffReason: null };
}

// Serves the repository's web/, dist/ (and tests/ with `tests`; from `root`, a folder laid out as
// the repository, if given) on a free port, with the agent of `browser` injected in its pages
// (with `csp`, a Content-Security-Policy: the pages it exempts, and `withoutIsolation`, see
// createStaticServer); resolves to { origin, stop }.
export async function startServer(browser, {
  isolated = true, tests = false, csp = null, root = ROOT, withoutIsolation = [],
} = {}) {
  const server = createStaticServer(root, {
    isolated, servedDirs: ['web', 'dist', ...(tests ? ['tests'] : [])], startPage: '/web/demo/',
    inject: browser.control.agentTag, csp, withoutIsolation,
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const origin = `http://127.0.0.1:${server.address().port}`;
  return { origin, stop: () => server.close() };
}

// Records lib.info as `browser` reported it (isolated or not) for the README's browser table.
export function recordBrowserInfo(browser, isolated, info) {
  const dir = join(RESULTS_DIR, 'browsers');
  mkdirSync(dir, { recursive: true });
  const { engine, product, variant = '', notes } = browser.spec;
  const row = { browser: browser.name, engine, product, variant, notes, version: browser.version, isolated, info };
  writeFileSync(join(dir, `${browser.name}-${isolated ? 'isolated' : 'not-isolated'}.json`), `${JSON.stringify(row, null, 2)}\n`);
}

// For a test file: the page at `path` (with its query; served as startServer's options in the
// rest of the second argument say) opened in each browser before its tests, ready once `ready(page)` resolves, and opened
// afresh before a test when an earlier one found it stuck. `body(ctx)` declares the tests with
// ctx.test, node:test's test(name, [options,] fn) except that a test which finds the page stuck
// (a call unanswered, a wait run out) is run once more on a fresh page and says so in its
// diagnostics; a second stall fails it. options.retryOnStuckPage: false turns that off (for a test
// whose point is that nothing stalls). ctx.page, ctx.browser and ctx.origin are set by then.
export function useTestPage(path, { ready, ...serve }, body) {
  forEachBrowser((ctx) => {
    let server;
    const open = async () => {
      await ctx.page.goto(`${server.origin}${path}`);
      await ready(ctx.page);
    };
    before(async () => {
      server = await startServer(ctx.browser, serve);
      ctx.origin = server.origin;
      await open();
    });
    beforeEach(async () => {
      if (ctx.page.control.timedOut) await open();
    });
    after(() => server?.stop());
    ctx.test = (name, ...rest) => {
      const fn = rest.pop();
      const { retryOnStuckPage = true, ...options } = rest[0] ?? {};
      test(name, options, async (t) => {
        try {
          return await fn(t);
        } catch (error) {
          if (!retryOnStuckPage || !ctx.page.control.timedOut) throw error;
          t.diagnostic(`run again on a fresh page, this one did not answer: ${error.message.split('\n')[0]}`);
          await open();
          return fn(t);
        }
      });
    };
    body(ctx);
  });
}

// What useTestPage's `ready` waits for: the demo's first run, or a test page's title.
export const demoReady = (page) => waitForRunsAbove(page, 0);
export const titledReady = (page) => page.waitForFunction(() => document.title === 'ready', null, { timeout: RUN_TIMEOUT_MS });

// The demo page served (isolated or not) at `query`, for useTestPage.
export const useDemoPage = ({ isolated = true, query = '' } = {}, body) =>
  useTestPage(`/web/demo/${query}`, { isolated, ready: demoReady }, body);

export const resultState = (page) =>
  page.evaluate(() => {
    const { dataset } = document.getElementById('result');
    return { ...dataset, runs: Number(dataset.runs) };
  });

// Waits until the page has finished more than `runs` runs and has none pending; returns its state.
export async function waitForRunsAbove(page, runs) {
  await page.waitForFunction(
    (before) => {
      const { dataset } = document.getElementById('result');
      return Number(dataset.runs) > before && (dataset.state === 'done' || dataset.state === 'error');
    },
    runs,
    { timeout: RUN_TIMEOUT_MS },
  );
  return resultState(page);
}

// Does `action` and waits for the run it causes; fails with the page's message if that run failed.
export async function runAfter(page, action) {
  const { runs } = await resultState(page);
  await action();
  const state = await waitForRunsAbove(page, runs);
  if (state.state !== 'done') throw new Error(`the page's run failed: ${state.error}`);
  return state;
}

export const parseTensor = (json) => JSON.parse(json);

// A screenshot of the page in test-results/, where the browser can take one; else says why not
// (t.diagnostic) and resolves to null.
export async function saveScreenshot(t, page, name) {
  const missing = page.unsupported('screenshots');
  if (missing) {
    t.diagnostic(`no screenshot ${name}: ${missing}`);
    return null;
  }
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, `${page.browser.name}-${name}`);
  await page.screenshot(path);
  return path;
}

// The tensors of a .safetensors file as { name: { dtype, shape, bytes } }, read straight from the
// file (independently of the page's reader).
export function readSafetensors(bytes) {
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8'));
  const tensors = {};
  for (const [name, { dtype, shape, data_offsets: [begin, end] = [] }] of Object.entries(header)) {
    if (name !== '__metadata__') tensors[name] = { dtype, shape, bytes: bytes.subarray(8 + headerLength + begin, 8 + headerLength + end) };
  }
  return tensors;
}

export function writeSafetensors(tensors) {
  const header = {};
  let offset = 0;
  for (const [name, { dtype, shape, bytes }] of Object.entries(tensors)) {
    header[name] = { dtype, shape, data_offsets: [offset, offset + bytes.length] };
    offset += bytes.length;
  }
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, json, ...Object.values(tensors).map((t) => t.bytes)]);
}

// A fixture's F32 tensor as { data, shape }, or null when the file has none of that name.
export function readFixtureTensor(bytes, name) {
  const tensor = readSafetensors(bytes)[name];
  if (!tensor) return null;
  if (tensor.dtype !== 'F32') throw new Error(`${name}: expected F32, found ${tensor.dtype}`);
  const data = new Float32Array(tensor.bytes.length / 4);
  for (let i = 0; i < data.length; i++) data[i] = tensor.bytes.readFloatLE(4 * i);
  return { data, shape: tensor.shape };
}

// Drops a file on the page the way a drag from the desktop does.
export const dropFile = (page, name, bytes) => page.dropFiles('body', { name, buffer: bytes });

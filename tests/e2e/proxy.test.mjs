// The proxy in Chromium (loadMHA({ proxy: true }) on a page's main thread, cross-origin isolated):
// the hostile-input table shared with the in-thread suite, weights from a sharded checkpoint, a
// worker that dies mid-call (ended by lib.terminate() and from outside, as a crash would),
// dispose() with calls pending, and 1,000 calls with a flat heap in the worker (WASM) and on the
// page (JS).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertClose, assertMatchesFixture, loadFixture } from '../js/helpers/fixtures.js';
import { HOSTILE_FIXTURE, hostileTable } from '../js/helpers/hostile_table.js';
import { expectedOutput, layoutFixture } from '../js/helpers/layout_fixtures.js';
import { checkDecoding, decodingFixtures } from '../js/helpers/decoding.js';
import { ROOT, launchBrowser } from './harness.mjs';
import { createStaticServer } from '../../scripts/static_server.mjs';

const fixture = loadFixture(HOSTILE_FIXTURE);
const table = hostileTable(fixture, { assert, assertClose, assertMatchesFixture });

const tensor = (plain) => plain && { data: Float32Array.from(plain.data), shape: plain.shape };
const result = (plain) => ({ output: tensor(plain.output), weights: tensor(plain.weights) });

let server;
let browser;
let page;
const consoleErrors = [];

before(async () => {
  server = createStaticServer(ROOT, { servedDirs: ['web', 'dist', 'tests'] });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  browser = await launchBrowser();
  page = await browser.context.newPage();
  page.on('pageerror', (error) => consoleErrors.push(error.message));
  // Keeps the Workers the page makes, so that a test can end one from outside.
  await page.addInitScript(() => {
    const PageWorker = window.Worker;
    window.createdWorkers = [];
    window.Worker = class extends PageWorker {
      constructor(...args) {
        super(...args);
        window.createdWorkers.push(this);
      }
    };
  });
  await page.goto(`http://127.0.0.1:${server.address().port}/tests/e2e/pages/proxy.html`);
  await page.waitForFunction(() => document.title === 'ready', null, { timeout: 60_000 });
});

after(async () => {
  await browser?.close();
  server?.close();
});

test('the library runs in the worker with threads', async () => {
  const info = await page.evaluate(() => window.proxyTest.info);
  assert.equal(info.proxy, true);
  assert.equal(info.build, 'relaxed-simd-threaded');  // Chromium has relaxed SIMD
  assert.equal(info.threadsOffReason, null);
});

test("inside the page's own Worker, proxy 'auto' runs the engine in that thread", async () => {
  const info = await page.evaluate(() => window.proxyTest.infoInAWorker());
  assert.equal(info.proxy, false);
  assert.equal(info.build, 'relaxed-simd-threaded');
});

describe('hostile input through the proxy', () => {
  table.errors.forEach(([what, , patterns], i) => {
    test(what, async () => {
      const outcome = await page.evaluate((row) => window.proxyTest.errorRow(row), i);
      assert.ok(outcome.isMHAError, `expected an MHAError, got ${JSON.stringify(outcome)}`);
      for (const pattern of patterns) assert.match(outcome.message, pattern);
      assertMatchesFixture(result(outcome.valid), fixture);
    });
  });
  table.results.forEach(([what, , check], i) => {
    test(what, async () => {
      const outcome = await page.evaluate((row) => window.proxyTest.resultRow(row), i);
      check(result(outcome.result));
      assertMatchesFixture(result(outcome.valid), fixture);
    });
  });
});

test('a checkpoint in two shards: listAttentionModules and loadSafetensors({ prefix, layout, names })', async () => {
  const fixture = layoutFixture('whisper_cross_two_shards_f16');
  const { modules, output, empty } = await page.evaluate((name) => window.proxyTest.shardedLayout(name), fixture.name);
  assert.deepEqual(modules.map((m) => [m.prefix, m.layout, m.embedDim, m.qSize]),
    fixture.config.modules.map((m) => [m.prefix, m.layout, m.embed_dim, m.q_size]));
  assertClose(tensor(output), expectedOutput(fixture), 'output through the proxy');
  assert.ok(empty.isMHAError, JSON.stringify(empty));
  assert.match(empty.message, /listAttentionModules: bytes: expected .* received an empty array/);
});

// KV caches made in the worker: created synchronously, their length mirrored after each call.
const DECODING = ['float16_gqa_rotary_weights.safetensors', 'cross_filled_once.safetensors',
  'self_truncate_continue.safetensors', 'sdpa_cache_gqa.safetensors',
  // today's models: the score options cross to the worker
  'gemma2_global_decoding.safetensors', 'sdpa_softcap_scale.safetensors',
  'gpt_oss_window_sinks_decoding.safetensors', 'sdpa_sinks_window.safetensors',
  'alibi_bloom_h6_decoding.safetensors', 'sdpa_alibi_slopes.safetensors'];
for (const fixture of decodingFixtures().filter((f) => DECODING.includes(f.name))) {
  test(`decoding through the proxy: ${fixture.name}`, async () => {
    const results = await page.evaluate((path) => window.proxyTest.decode(path), fixture.path);
    checkDecoding(fixture, results.map((r) => ({ ...result(r), length: r.length })));
  });
}

test('dispose() with calls pending: they finish, later calls throw', async () => {
  const { results, later } = await page.evaluate(() => window.proxyTest.disposeWithCallsPending());
  assert.equal(results.length, 3);
  for (const r of results) assertMatchesFixture(result(r), fixture);
  assert.ok(later.threw && later.isMHAError, JSON.stringify(later));
  assert.match(later.message, /forward: expected a live module, received one that was disposed/);
});

test('inputs changed right after their calls are sent: results are of the inputs at call time', async () => {
  assert.equal(await page.evaluate(() => window.proxyTest.changedAfterSend()), 0);
});

test('1,000 calls: the worker\'s WASM heap and the page\'s JS heap stay flat', async () => {
  const cdp = await page.context().newCDPSession(page);
  const pageHeap = async () => {
    await cdp.send('HeapProfiler.collectGarbage');
    return (await cdp.send('Runtime.getHeapUsage')).usedSize;
  };
  const warm = await page.evaluate(() => window.proxyTest.manyCalls(200));
  const pageBefore = await pageHeap();
  const end = await page.evaluate(() => window.proxyTest.manyCalls(1000));
  const pageAfter = await pageHeap();
  assert.equal(end.inUseBytes, warm.inUseBytes, 'bytes in use in the worker\'s WASM heap');
  assert.equal(end.heapTop, warm.heapTop, 'the worker\'s WASM heap top');
  assert.ok(pageAfter - pageBefore < 512 * 1024,
    `the page's JS heap grew by ${pageAfter - pageBefore} bytes over 1,000 calls`);
});

test('modules dropped without dispose() are freed in the worker once collected', async () => {
  const cdp = await page.context().newCDPSession(page);
  const before = await page.evaluate(() => window.proxyTest.inUseBytes());
  const holding = await page.evaluate(() => window.proxyTest.forgetModules(20));
  assert.ok(holding > before, 'the modules hold memory in the worker');
  let now = holding;
  for (let attempt = 0; attempt < 50 && now > before; attempt++) {
    await cdp.send('HeapProfiler.collectGarbage');
    now = await page.evaluate(() => window.proxyTest.inUseBytes());
  }
  assert.equal(now, before);
});

for (const [stop, how] of [['terminateByApi', 'lib.terminate()'], ['terminateFromOutside', 'Worker.terminate() from outside']]) {
  test(`a worker ended mid-call by ${how} rejects its calls; the next call starts afresh`, async () => {
    const outcome = await page.evaluate((name) => window.proxyTest.stoppedMidCall(name), stop);
    for (const failed of [outcome.stopped, outcome.later]) {
      assert.ok(failed.isMHAError, JSON.stringify(failed));
      assert.match(failed.message, /the engine's worker stopped/);
    }
    assertMatchesFixture(result(outcome.again), fixture);
  });
}

test('no uncaught errors on the page', () => {
  assert.deepEqual(consoleErrors, []);
});

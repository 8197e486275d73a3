// The proxy in each browser (loadMHA({ proxy: true }) on a page's main thread, cross-origin
// isolated): the build the browser allows, the hostile-input table shared with the in-thread
// suite, weights from a sharded checkpoint, decoding fixtures (beam searches too) on caches in the
// worker, cache.reorder's contract, a worker that dies mid-call (ended by lib.terminate() and from
// outside, as a crash would), dispose() with calls pending, 1,000 calls with a flat heap in the
// worker (WASM) and on the page (JS), and a stress loop of thousands of calls (Firefox's stalls:
// a late wake-up of the shared-memory channel it had then, issue 25).
import assert from 'node:assert/strict';
import { before, describe } from 'node:test';
import { assertClose, assertMatchesFixture, loadFixture } from '../js/helpers/fixtures.js';
import { HOSTILE_FIXTURE, hostileTable } from '../js/helpers/hostile_table.js';
import { expectedOutput, layoutFixture } from '../js/helpers/layout_fixtures.js';
import { checkDecoding, decodingFixtures } from '../js/helpers/decoding.js';
import { expectedBuild, recordBrowserInfo, titledReady, useTestPage } from './harness.mjs';

const fixture = loadFixture(HOSTILE_FIXTURE);
const table = hostileTable(fixture, { assert, assertClose, assertMatchesFixture });

const tensor = (plain) => plain && { data: Float32Array.from(plain.data), shape: plain.shape };
const result = (plain) => ({ output: tensor(plain.output), weights: tensor(plain.weights) });

useTestPage('/tests/e2e/pages/proxy.html', { tests: true, ready: titledReady }, (ctx) => {
  const { test } = ctx;
  let page;
  let browser;
  before(() => {
    ({ browser, page } = ctx);
  });

  test('the library runs in the worker with the build this browser allows', async () => {
    const info = await page.evaluate(() => window.proxyTest.info);
    recordBrowserInfo(browser, true, info);
    const expected = expectedBuild(ctx.spec, true);
    assert.equal(info.proxy, true);
    assert.equal(info.build, expected.build);
    if (expected.threadsOffReason) assert.match(info.threadsOffReason, expected.threadsOffReason);
    else assert.equal(info.threadsOffReason, null);
  });

  test("inside the page's own Worker, proxy 'auto' runs the engine in that thread", async () => {
    const info = await page.evaluate(() => window.proxyTest.infoInAWorker());
    assert.equal(info.proxy, false);
    assert.equal(info.build, expectedBuild(ctx.spec, true).build);
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
      test(what, async (t) => {
        // Rows about shared buffers need the browser to have them (WebKitGTK has not).
        if (/SharedArrayBuffer/.test(what) && !ctx.spec.sharedArrayBuffer) {
          t.skip(`${browser.label} has no SharedArrayBuffer`);
          return;
        }
        const outcome = await page.evaluate((row) => window.proxyTest.resultRow(row), i);
        check(result(outcome.result));
        assertMatchesFixture(result(outcome.valid), fixture);
      });
    });
  });

  // Whisper's cross-attention, and Falcon-40B's neox layout (grouped heads, rotary).
  for (const name of ['whisper_cross_two_shards_f16', 'falcon_40b_gqa_two_shards']) {
    test(`a checkpoint in two shards: listAttentionModules and loadSafetensors({ prefix, layout, names }): ${name}`, async () => {
      const fixture = layoutFixture(name);
      const { modules, output, empty } = await page.evaluate((n) => window.proxyTest.shardedLayout(n), fixture.name);
      assert.deepEqual(modules.map((m) => [m.prefix, m.layout, m.embedDim, m.qSize]),
        fixture.config.modules.map((m) => [m.prefix, m.layout, m.embed_dim, m.q_size]));
      assertClose(tensor(output), expectedOutput(fixture), 'output through the proxy');
      assert.ok(empty.isMHAError, JSON.stringify(empty));
      assert.match(empty.message, /listAttentionModules: bytes: expected .* received an empty array/);
    });
  }

  // KV caches made in the worker: created synchronously, their length and held mirrored after
  // each call.
  const DECODING = ['float16_gqa_rotary_weights.safetensors', 'cross_filled_once.safetensors',
    'self_truncate_continue.safetensors', 'sdpa_cache_gqa.safetensors',
    'beam_self_gqa_rotary.safetensors', 'beam_float16_batch_first.safetensors', 'beam_sdpa_gqa.safetensors',
    // today's models: the score options cross to the worker
    'gemma2_global_decoding.safetensors', 'sdpa_softcap_scale.safetensors',
    'gpt_oss_window_sinks_decoding.safetensors', 'sdpa_sinks_window.safetensors',
    'alibi_bloom_h6_decoding.safetensors', 'sdpa_alibi_slopes.safetensors',
    'qwen3_qk_norm_decoding.safetensors', 'cohere_qk_norm_layer_per_head.safetensors',
    // ... and the rest of them: [left, right] windows, ALiBi's own slopes (a Float32Array) and
    // symmetric form, q/k norms over the whole projection, with an offset, with a bias
    'window_left_right_bidirectional.safetensors', 'alibi_slopes_float_kpm_weights_averaged.safetensors',
    'alibi_symmetric_jina_bidirectional.safetensors', 'olmo2_qk_norm_all_decoding.safetensors',
    'gemma3_qk_norm_window_decoding.safetensors', 'chameleon_qk_norm_layer_bias_weights.safetensors',
    // scaled rotary: config.json's rope_scaling and a Float32Array table cross to the worker
    'gpt_oss_yarn_window_sinks_decoding.safetensors', 'llama3_past_original_decoding.safetensors',
    'inv_freq_attention_factor_decoding.safetensors',
    // generation: positions and rolling caches cross to the worker
    'ragged_left_padded_gqa_rotary.safetensors', 'rolling_smallest_gqa_rotary.safetensors',
    'rolling_sdpa_gqa.safetensors'];
  for (const fixture of decodingFixtures().filter((f) => DECODING.includes(f.name))) {
    test(`decoding through the proxy: ${fixture.name}`, async () => {
      const results = await page.evaluate((path) => window.proxyTest.decode(path), fixture.path);
      checkDecoding(fixture, results.map((r) => ({ ...result(r), length: r.length, held: r.held })));
    });
  }

  test('cache.reorder: bad arrays and bad indices reject, calls run in the order sent', async () => {
    const r = await page.evaluate(() => window.proxyTest.reorder());
    for (const [outcome, pattern] of [
      [r.wrongType, /^reorder: indices: expected an Int32Array of batchSize \(2\) entries, received an Array of length 2$/],
      [r.wrongLength, /^reorder: indices: expected batchSize \(2\) entries, received 3$/],
      [r.outOfRange, /^reorder: indices\[1\]: expected an index in \[0, 2\) .* got 2; the cache is left as it was$/],
      [r.disposed, /^reorder: expected a live KVCache, received one that was disposed$/]]) {
      assert.ok(!outcome.threw && outcome.isMHAError, JSON.stringify(outcome));
      assert.match(outcome.message, pattern);
    }
    assert.equal(r.reordered, null);
    assert.ok(r.rowDifference < 1e-6, `both entries hold entry 1's keys: rows differ by ${r.rowDifference}`);
    assert.equal(r.length, 4);
  });

  test('dispose() with calls pending: they finish, later calls reject', async () => {
    const { results, later } = await page.evaluate(() => window.proxyTest.disposeWithCallsPending());
    assert.equal(results.length, 3);
    for (const r of results) assertMatchesFixture(result(r), fixture);
    assert.ok(!later.threw && later.isMHAError, JSON.stringify(later));
    assert.match(later.message, /forward: expected a live module, received one that was disposed/);
  });

  test('loadMHA() gives the same options one worker; lib.dispose() ends it, then loads afresh', async () => {
    const r = await page.evaluate(() => window.proxyTest.disposedLibrary());
    assert.equal(r.loadedOnce, true);
    assert.equal(r.ended, 1, 'dispose() ended one worker');
    assert.ok(!r.later.threw && r.later.isMHAError, JSON.stringify(r.later));
    assert.match(r.later.message, /heapInfo: expected a live library, received one that was disposed/);
    assert.equal(r.fresh, true);
    assert.equal(r.works, true);
  });

  test('inputs changed right after their calls are sent: results are of the inputs at call time', async () => {
    assert.equal(await page.evaluate(() => window.proxyTest.changedAfterSend()), 0);
  });

  test('1,000 calls: the worker\'s WASM heap and the page\'s JS heap stay flat', async (t) => {
    const measurePage = !page.unsupported('JS heap size') && !page.unsupported('forced garbage collection');
    if (!measurePage) t.diagnostic(`the page's JS heap not measured: ${page.unsupported('JS heap size')}`);
    const pageHeap = async () => {
      if (!measurePage) return 0;
      await page.collectGarbage();
      return page.jsHeapUsed();
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

  // Each round is a module created, loaded, run forward and disposed (4 calls). Firefox stalled
  // here with the shared-memory channel it had then (issue 25): a rare interleaving, hence so many calls.
  const STRESS_ROUNDS = Number(process.env.E2E_STRESS_ROUNDS ?? 10_000);
  // A stall here must fail, not be run again.
  test(`${(4 * STRESS_ROUNDS).toLocaleString('en')} calls one after another through the proxy: none stalls`, { retryOnStuckPage: false }, async (t) => {
    const { calls, ms, stalled } = await page.evaluate(([rounds, stallMs]) => window.proxyTest.stress(rounds, stallMs),
      [STRESS_ROUNDS, 20_000], { timeout: 10 * 60_000 });
    t.diagnostic(`${browser.label}: ${calls} calls in ${(ms / 1000).toFixed(1)} s`);
    assert.equal(stalled, null);
    assert.equal(calls, 4 * STRESS_ROUNDS);
  });

  test('modules dropped without dispose() are freed in the worker once collected', async (t) => {
    const missing = page.unsupported('forced garbage collection');
    if (missing) return t.skip(missing);
    const before = await page.evaluate(() => window.proxyTest.inUseBytes());
    const holding = await page.evaluate(() => window.proxyTest.forgetModules(20));
    assert.ok(holding > before, 'the modules hold memory in the worker');
    let now = holding;
    for (let attempt = 0; attempt < 50 && now > before; attempt++) {
      await page.collectGarbage();
      now = await page.evaluate(() => window.proxyTest.inUseBytes());
    }
    assert.equal(now, before);
    return undefined;
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
    assert.deepEqual(page.errors(), []);
  });
});

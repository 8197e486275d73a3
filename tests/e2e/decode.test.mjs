// The demo's decoding mode in each browser: Step feeds one query token at a time through a KV cache;
// each step's row of weights has one more key and equals that row of a causal forward over the
// whole sequence (incremental decoding is exact); Play runs to the end; Reset and any change of
// the settings start over; Save keeps the cache (cache.save(), through the proxy) in IndexedDB and,
// after a reload, Restore (mha.loadKVCache) continues it with the bits of an uninterrupted run.
import assert from 'node:assert/strict';
import { demoReady, parseTensor, runAfter, saveScreenshot, useDemoPage } from './harness.mjs';

const STEP_TIMEOUT_MS = 60_000;
const LENGTH = 12; // the page's default query length

useDemoPage({ query: '?threads=2' }, (demo) => {
  const { test } = demo;
  const decodeState = () => demo.page.locator('#decode-result').evaluate((element) => ({ ...element.dataset }));

  // Clicks `button` and waits until the decoding mode has taken `steps` steps (or failed).
  async function clickUntil(button, steps) {
    await demo.page.locator(button).click();
    await demo.page.waitForFunction((n) => {
      const { dataset } = document.getElementById('decode-result');
      return Number(dataset.steps) === n || dataset.error;
    }, steps, { timeout: STEP_TIMEOUT_MS });
    const state = await decodeState();
    assert.equal(state.error, '', state.error);
    return state;
  }

  test('each step adds a row one key longer, equal to that row of the causal forward', async (t) => {
    // The page's forward, causal with weights averaged over heads: the rows decoding must give.
    const full = await runAfter(demo.page, async () => {
      await demo.page.locator('#causal').check();
      await demo.page.locator('label:has(input[name="average"][value="averaged"])').click();
      await demo.page.locator('#run').click();
    });
    const weights = parseTensor(full.weights);
    assert.deepEqual(weights.shape, [1, LENGTH, LENGTH]);
    for (let step = 1; step <= 4; step++) {
      const state = await clickUntil('#decode-step', step);
      const row = JSON.parse(state.row);
      assert.equal(row.length, step, `step ${step}: the new query sees ${step} keys`);
      assert.equal(Number(state.cacheLength), step);
      assert.ok(Number(state.timeMs) > 0);
      const expected = weights.data.slice((step - 1) * LENGTH, (step - 1) * LENGTH + step);
      row.forEach((w, k) => assert.ok(Math.abs(w - expected[k]) < 1e-5,
        `step ${step}, key ${k}: ${w} vs the forward's ${expected[k]}`));
    }
    assert.match(await demo.page.locator('#decode-status').textContent(), /step 4 of 12/);
    assert.equal(await demo.page.locator('#decode-canvas').isVisible(), true);
    await saveScreenshot(t, demo.page, 'demo-decode.png');
  });

  test('Play runs to the end of the sequence, then Step is disabled; Reset starts over', async () => {
    const state = await clickUntil('#decode-play', LENGTH);
    assert.equal(JSON.parse(state.row).length, LENGTH);
    assert.equal(await demo.page.locator('#decode-step').isDisabled(), true);
    await demo.page.locator('#decode-reset').click();
    assert.equal((await decodeState()).steps, '0');
    assert.equal(await demo.page.locator('#decode-step').isDisabled(), false);
    assert.equal((await clickUntil('#decode-step', 1)).cacheLength, '1');
  });

  test('changing a setting starts the decoding over with the new module', async () => {
    await clickUntil('#decode-step', 2);
    await runAfter(demo.page, () => demo.page.locator('#heads').fill('2'));
    assert.equal((await decodeState()).steps, '0');
    const state = await clickUntil('#decode-step', 1);
    assert.deepEqual(JSON.parse(state.row), [1]); // one key: all the weight
    assert.deepEqual(demo.page.errors(), []);
  });

  test('Save, then after a reload Restore: the steps continue with the bits of an uninterrupted run', async () => {
    const reload = async () => {
      await demo.page.goto(`${demo.origin}/web/demo/?threads=2`);
      await demoReady(demo.page);
    };
    await reload();
    for (let step = 1; step <= 5; step++) await clickUntil('#decode-step', step);
    await demo.page.locator('#decode-save').click();
    await demo.page.waitForFunction(() => document.getElementById('decode-result').dataset.note?.startsWith('saved'));
    assert.match((await decodeState()).note, /^saved 5 steps, the cache in \d+ bytes$/);
    const sixth = (await clickUntil('#decode-step', 6)).row;
    const last = (await clickUntil('#decode-play', LENGTH)).row;

    await reload();
    await demo.page.locator('#decode-restore').click();
    await demo.page.waitForFunction(() => Number(document.getElementById('decode-result').dataset.steps) === 5 ||
      document.getElementById('decode-result').dataset.error);
    const restored = await decodeState();
    assert.equal(restored.error, '', restored.error);
    assert.match(restored.note, /^restored 5 steps, the cache from \d+ bytes$/);
    assert.equal(restored.cacheLength, '5');
    assert.equal((await clickUntil('#decode-step', 6)).row, sixth);
    assert.equal((await clickUntil('#decode-play', LENGTH)).row, last);
    assert.deepEqual(demo.page.errors(), []);
  });
});

// The demo's score options in each browser (window, ALiBi, soft-cap, sinks, scale): the heatmaps'
// data shows each one (a window's band, ALiBi's decay, a soft-cap's flattening, a sink's missing
// mass), the page's check against its JS reference holds, and the decoding mode takes them too.
import assert from 'node:assert/strict';
import { parseTensor, runAfter, useDemoPage } from './harness.mjs';

const LENGTH = 12; // the page's default query length
const HEADS = 4;
const NO_SCORES = { scale: '', softcap: '', window: '', alibi: 'off', slopes: '0.5', symmetric: false, sinks: false, sinkLogits: '1' };

useDemoPage({ query: '?threads=2' }, (demo) => {
  const { test } = demo;
  const chooseRadio = (name, value) => demo.page.locator(`label:has(input[name="${name}"][value="${value}"])`).click();

  // Sets the weights source, causal and every score control (those not given are off), then runs.
  const runWith = ({ source = 'preset', causal = false, averaged = false, ...scores }) => runAfter(demo.page, async () => {
    const page = demo.page;
    const s = { ...NO_SCORES, ...scores };
    await chooseRadio('source', source);
    await chooseRadio('average', averaged ? 'averaged' : 'per-head');
    await page.locator('#causal')[causal ? 'check' : 'uncheck']();
    for (const id of ['scale', 'softcap', 'window']) await page.locator(`#${id}`).fill(s[id]);
    await page.locator('#alibi').selectOption(s.alibi);
    await page.locator('#alibi-slopes').fill(s.slopes);
    await page.locator('#alibi-symmetric')[s.symmetric ? 'check' : 'uncheck']();
    await page.locator('#sinks')[s.sinks ? 'check' : 'uncheck']();
    await page.locator('#sink-logits').fill(s.sinkLogits);
    await page.locator('#run').click();
  });

  // The run's weights as at(h, i, j), after asserting the page's check against its reference.
  function weightsOf(state) {
    const check = JSON.parse(state.check);
    assert.equal(check.against, 'JS reference');
    assert.ok(check.ok && check.maxAbsError < 1e-4, `the page's diff vs its JS reference: ${state.check}`);
    const { data, shape } = parseTensor(state.weights);
    assert.deepEqual(shape, [1, HEADS, LENGTH, LENGTH]);
    return (h, i, j) => data[(h * LENGTH + i) * LENGTH + j];
  }
  const rowSum = (at, h, i) => Array.from({ length: LENGTH }, (_, j) => at(h, i, j)).reduce((a, b) => a + b, 0);

  test('a window of 3 with causal: weights outside the band are 0, rows inside still sum to 1', async () => {
    const at = weightsOf(await runWith({ causal: true, window: '3' }));
    for (let h = 0; h < HEADS; h++) {
      for (let i = 0; i < LENGTH; i++) {
        for (let j = 0; j < LENGTH; j++) {
          if (j <= i - 3 || j > i) assert.equal(at(h, i, j), 0, `head ${h}, query ${i}, key ${j} is outside the band`);
        }
        assert.ok(Math.abs(rowSum(at, h, i) - 1) < 1e-5, `head ${h}, query ${i}`);
      }
    }
    // The first-token head attends key 0 while the window holds it.
    assert.ok(at(1, 2, 0) > 0.5, 'query 2 still sees key 0');
  });

  test('a window "1, 1": each query sees its neighbours and itself only', async () => {
    const at = weightsOf(await runWith({ window: '1, 1' }));
    for (let h = 0; h < HEADS; h++) {
      for (let i = 0; i < LENGTH; i++) {
        for (let j = 0; j < LENGTH; j++) {
          if (Math.abs(i - j) > 1) assert.equal(at(h, i, j), 0, `head ${h}, query ${i}, key ${j}`);
        }
      }
    }
    assert.ok(at(3, 4, 5) > 0.9, 'the next-token head keeps its key');
  });

  // A tiny scale leaves ALiBi alone in the scores: weights fall by e^-m per key away from the query.
  const SLOPES = [0.25, 0.0625, 0.015625, 0.00390625]; // the ALiBi paper's for 4 heads

  test("ALiBi (paper's slopes) with causal: each key further back weighs e^-m_h times the one after it", async () => {
    const at = weightsOf(await runWith({ causal: true, scale: '1e-9', alibi: 'paper' }));
    for (let h = 0; h < HEADS; h++) {
      for (let i = 1; i < LENGTH; i++) {
        for (let j = 1; j <= i; j++) {
          const ratio = at(h, i, j - 1) / at(h, i, j);
          assert.ok(Math.abs(ratio - Math.exp(-SLOPES[h])) < 1e-4, `head ${h}, query ${i}, keys ${j - 1}/${j}: ${ratio}`);
        }
      }
    }
  });

  test('symmetric ALiBi with my slopes: weights peak at the query and decay on both sides', async () => {
    const at = weightsOf(await runWith({ scale: '1e-9', alibi: 'slopes', slopes: '1, 0.5, 0.25, 0', symmetric: true }));
    const slopes = [1, 0.5, 0.25, 0];
    for (let h = 0; h < HEADS; h++) {
      for (let i = 0; i < LENGTH; i++) {
        for (let j = 0; j < LENGTH; j++) {
          const ratio = at(h, i, j) / at(h, i, i);
          assert.ok(Math.abs(ratio - Math.exp(-slopes[h] * Math.abs(j - i))) < 1e-4, `head ${h}, query ${i}, key ${j}: ${ratio}`);
        }
      }
    }
  });

  test('a soft-cap of 1 bounds the scores to [-1, 1]: no weight in a row is e^2 times another', async () => {
    const sharp = weightsOf(await runWith({}));
    const spread = (at, h, i) => {
      const row = Array.from({ length: LENGTH }, (_, j) => at(h, i, j));
      return Math.max(...row) / Math.min(...row);
    };
    assert.ok(spread(sharp, 0, 5) > Math.exp(5), 'without it the preset heads are sharp');
    const at = weightsOf(await runWith({ softcap: '1' }));
    for (let h = 0; h < HEADS; h++) {
      for (let i = 0; i < LENGTH; i++) assert.ok(spread(at, h, i) <= Math.exp(2) * (1 + 1e-5), `head ${h}, query ${i}: ${spread(at, h, i)}`);
    }
  });

  test('sinks: rows sum to less than 1, and the strip beside each map shows the missing mass', async () => {
    const state = await runWith({ source: 'random', sinks: true, sinkLogits: '2, 1, 1.5, 3' });
    const at = weightsOf(state);
    const strips = await demo.page.locator('#weights-maps canvas.missing-mass')
      .evaluateAll((canvases) => canvases.map((c) => JSON.parse(c.dataset.missingMass)));
    assert.equal(strips.length, HEADS + 1, 'a strip per head and the average');
    for (let h = 0; h < HEADS; h++) {
      for (let i = 0; i < LENGTH; i++) {
        const sum = rowSum(at, h, i);
        assert.ok(sum < 0.99, `head ${h}, query ${i} sums to ${sum}`);
        assert.ok(Math.abs(strips[h][i] - (1 - sum)) < 1e-5, `head ${h}, query ${i}: strip ${strips[h][i]} vs 1 - ${sum}`);
      }
    }
    assert.match(await demo.page.locator('#weights-maps .map-title').first().textContent(), /the sink takes/);
    const without = await runWith({ source: 'random' });
    weightsOf(without);
    assert.equal(await demo.page.locator('#weights-maps canvas.missing-mass').evaluateAll((c) => c.length), 0, 'no strip without sinks');
  });

  test('bad option text shows a message naming the control', async () => {
    for (const [scores, message] of [
      [{ window: '0' }, /window must be a whole number W >= 1 or "left, right"/],
      [{ sinks: true, sinkLogits: '1, 2' }, /sink logits: give one value or one per head \(4\); got 2/],
      [{ softcap: '-3' }, /soft-cap must be a positive number/],
    ]) {
      await assert.rejects(runWith(scores), /the page's run failed/);
      assert.match(await demo.page.locator('#message').textContent(), message);
    }
    weightsOf(await runWith({}));
    assert.deepEqual(demo.page.errors(), []);
  });

  test('decoding with a window of 3 and sinks: each step keeps the band, loses the sink\'s mass, and equals the forward', async () => {
    const full = await runWith({ source: 'random', causal: true, averaged: true, window: '3', sinks: true, sinkLogits: '0.5' });
    const forward = parseTensor(full.weights);
    assert.deepEqual(forward.shape, [1, LENGTH, LENGTH]);
    for (let step = 1; step <= 6; step++) {
      await demo.page.locator('#decode-step').click();
      await demo.page.waitForFunction((n) => {
        const { dataset } = document.getElementById('decode-result');
        return Number(dataset.steps) === n || dataset.error;
      }, step, { timeout: 60_000 });
      const state = await demo.page.locator('#decode-result').evaluate((element) => ({ ...element.dataset }));
      assert.equal(state.error, '');
      const row = JSON.parse(state.row);
      assert.equal(row.length, step);
      row.forEach((w, k) => {
        const expected = forward.data[(step - 1) * LENGTH + k];
        assert.ok(Math.abs(w - expected) < 1e-5, `step ${step}, key ${k}: ${w} vs the forward's ${expected}`);
        if (k <= step - 1 - 3) assert.equal(w, 0, `step ${step}, key ${k} is outside the window`);
      });
      const sum = row.reduce((a, b) => a + b, 0);
      assert.ok(sum < 0.99, `step ${step} sums to ${sum}`);
      assert.ok(Math.abs(Number(state.missingMass) - (1 - sum)) < 1e-6, `step ${step}: shown ${state.missingMass}`);
    }
    assert.match(await demo.page.locator('#decode-status').textContent(), /the sink takes 0\.\d+ of this row/);
    assert.deepEqual(demo.page.errors(), []);
  });
});

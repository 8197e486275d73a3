// The demo's decoding mode as generation runs it, in each browser: a batch of two prompts of
// different lengths (left padded, a key padding mask, Hugging Face's position_ids as `positions`)
// whose rows equal each prompt decoded alone, and a rolling window whose cache keeps the smallest
// maxLength the window allows, reuses its slots (slot = position % maxLength) and gives the rows of
// a computation that keeps every key.
import assert from 'node:assert/strict';
import { runAfter, saveScreenshot, useDemoPage } from './harness.mjs';

const STEP_TIMEOUT_MS = 60_000;
const LENGTH = 12; // the page's default query length
const EMBED = 64; // and embed dim
const PADS = [0, 4]; // the second prompt: 12 - floor(12 / 3) = 8 tokens
const TOLERANCE = 1e-5;

useDemoPage({ query: '?threads=2' }, (demo) => {
  const { test } = demo;
  const page = () => demo.page;
  const decodeState = () => page().locator('#decode-result').evaluate((element) => ({ ...element.dataset }));
  const chooseRadio = (name, value) => page().locator(`label:has(input[name="${name}"][value="${value}"])`).click();

  // Random weights, the given window, rotary and sinks, then a run (which also resets the
  // decoding). The click on Run comes last: it cancels the runs the other changes scheduled, so
  // the run waited for is the one of all the settings.
  const settle = ({ window = '', rotary = false, sinks = false }) => runAfter(page(), async () => {
    await chooseRadio('source', 'random');
    await page().locator('#window').fill(window);
    await page().locator('#rotary')[rotary ? 'check' : 'uncheck']();
    await page().locator('#sinks')[sinks ? 'check' : 'uncheck']();
    await page().locator('#run').click();
  });

  // Clicks `button` until the decoding has taken `steps` steps; returns its state (or its error).
  async function clickUntil(button, steps) {
    await page().locator(button).click();
    await page().waitForFunction((n) => {
      const { dataset } = document.getElementById('decode-result');
      return Number(dataset.steps) === n || dataset.error;
    }, steps, { timeout: STEP_TIMEOUT_MS });
    return decodeState();
  }
  const stepOk = async (button, steps) => {
    const state = await clickUntil(button, steps);
    assert.equal(state.error, '', state.error);
    return state;
  };

  // The page's own check of a forward against its float64 JS reference.
  const checkedOutput = (state) => {
    const check = JSON.parse(state.check);
    assert.equal(check.against, 'JS reference');
    assert.ok(check.ok && check.maxAbsError < 1e-4, `the page's diff vs its JS reference: ${state.check}`);
    return JSON.parse(state.output).data;
  };

  test('rotary positions on the forward, self- and cross-attention: the JS reference (which rotates too) agrees', async () => {
    const plain = checkedOutput(await settle({}));
    const rotated = checkedOutput(await settle({ rotary: true }));
    assert.ok(rotated.some((v, i) => Math.abs(v - plain[i]) > 1e-3), 'rotary changes the output');
    checkedOutput(await runAfter(page(), () => chooseRadio('attention', 'cross')));
    await runAfter(page(), () => chooseRadio('attention', 'self'));
  });

  test('a batch of two prompts: each row equals its prompt decoded alone, pads get no weight, positions restart at 0', async (t) => {
    await settle({ rotary: true });
    // The engine decoding the shorter prompt alone (the plain mode, first 8 tokens): the rows the
    // padded row must give, slot for slot after its pads.
    await chooseRadio('decode-mode', 'single');
    const alone = [];
    for (let step = 1; step <= LENGTH - PADS[1]; step++) alone.push(JSON.parse((await stepOk('#decode-step', step)).row));

    await chooseRadio('decode-mode', 'batch');
    assert.equal((await decodeState()).steps, '0', 'a new mode starts over');
    const state = await stepOk('#decode-play', LENGTH);
    assert.equal(state.mode, 'batch');
    assert.deepEqual(JSON.parse(state.pads), PADS);
    const errors = JSON.parse(state.errors);
    errors.forEach((e, n) => assert.ok(e < TOLERANCE, `row ${n}: max |err| ${e} vs its prompt alone (float64 reference)`));

    const positions = JSON.parse(state.positions);
    assert.equal(positions.length, LENGTH);
    positions.forEach(([p0, p1], slot) => {
      assert.equal(p0, slot, `row 0 (no pads), slot ${slot}`);
      assert.equal(p1, slot < PADS[1] ? 1 : slot - PADS[1], `row 1, slot ${slot}: Hugging Face's position_ids`);
    });

    const rows = JSON.parse(state.rows);
    for (let slot = PADS[1]; slot < LENGTH; slot++) {
      const row = rows[1][slot];
      assert.equal(row.length, slot + 1);
      for (let k = 0; k < PADS[1]; k++) assert.equal(row[k], 0, `row 1, step ${slot}: pad slot ${k} has weight`);
      const real = row.slice(PADS[1]);
      const expected = alone[slot - PADS[1]];
      real.forEach((w, k) => assert.ok(Math.abs(w - expected[k]) < TOLERANCE,
        `row 1, step ${slot}, slot ${k + PADS[1]}: ${w} vs ${expected[k]} decoding the prompt alone`));
      assert.ok(Math.abs(real.reduce((a, b) => a + b, 0) - 1) < TOLERANCE, `row 1, step ${slot} sums to 1`);
    }
    assert.equal(await page().locator('#decode-canvas-1').isVisible(), true, 'both rows are drawn');
    assert.match(await page().locator('#decode-status').textContent(), /max \|err\| vs each prompt alone \(float64\): row 0 .+, row 1 /);
    await saveScreenshot(t, page(), 'demo-decode-batch.png');
    assert.deepEqual(page().errors(), []);
  });

  test('choosing the batch turns Rotary positions on; unchecked again, the batch says it needs them', async () => {
    await settle({});
    await chooseRadio('decode-mode', 'single');
    await runAfter(page(), () => chooseRadio('decode-mode', 'batch'));
    assert.equal(await page().locator('#rotary').evaluate((input) => input.checked), true);
    assert.equal((await stepOk('#decode-step', 1)).mode, 'batch');
    await runAfter(page(), () => page().locator('#rotary').uncheck());
    const state = await clickUntil('#decode-step', 1);
    assert.match(state.error, /check "Rotary positions" under Scores/);
    assert.match(await page().locator('#decode-status').textContent(), /Decoding failed: a batch of prompts passes `positions`/);
  });

  test('a rolling window of 3: maxLength 3, held stays 3 past it, slots reused as position % 3, rows exact', async (t) => {
    await settle({ window: '3', rotary: true });
    await chooseRadio('decode-mode', 'rolling');
    let bytes = null;
    for (let step = 1; step <= LENGTH; step++) {
      const state = await stepOk('#decode-step', step);
      assert.equal(state.maxLength, '3', 'the smallest maxLength for one-token steps: left window 2 + 1');
      assert.equal(Number(state.cacheLength), step, 'length keeps counting positions');
      assert.equal(Number(state.held), Math.min(step, 3), `step ${step}: keys held`);
      const held = Array.from({ length: Math.min(step, 3) }, (_, i) => step - Math.min(step, 3) + i);
      const expectedSlots = [null, null, null];
      for (const p of held) expectedSlots[p % 3] = p;
      assert.deepEqual(JSON.parse(state.slots), expectedSlots, `step ${step}: the position each slot holds`);
      const shown = await page().locator('#decode-slots .slot').evaluateAll((cells) => cells.map((c) => c.dataset.position));
      assert.deepEqual(shown, expectedSlots.map((p) => (p === null ? '' : String(p))), `step ${step}: the strip`);
      bytes ??= Number(state.bytes);
      assert.equal(Number(state.bytes), bytes, 'the cache never grows');
      assert.ok(bytes > 0 && bytes <= 2 * 3 * EMBED * 4, `${bytes} bytes: keys and values of 3 positions`);
      const [error] = JSON.parse(state.errors);
      assert.ok(error < TOLERANCE, `step ${step}: max |err| ${error} vs the reference that keeps every key`);
      JSON.parse(state.row).forEach((w, k) => {
        if (k < step - 3) assert.equal(w, 0, `step ${step}: key ${k} is outside the window`);
      });
    }
    assert.match(await page().locator('#decode-status').textContent(), /length 12 · held 3 of maxLength 3/);
    await saveScreenshot(t, page(), 'demo-decode-rolling.png');
  });

  test('a rolling "2, 0" window with sinks: maxLength 3 as well, and still exact', async () => {
    await settle({ window: '2, 0', rotary: true, sinks: true });
    await chooseRadio('decode-mode', 'rolling');
    const state = await stepOk('#decode-play', LENGTH);
    assert.equal(state.maxLength, '3');
    assert.equal(state.held, '3');
    assert.deepEqual(JSON.parse(state.slots), [9, 10, 11]);
    assert.ok(JSON.parse(state.errors)[0] < TOLERANCE, state.errors);
    assert.ok(Number(state.missingMass) > 0, 'the sink takes some of each row');
  });

  test('a rolling window without a window says it needs one', async () => {
    await settle({});
    await chooseRadio('decode-mode', 'rolling');
    const state = await clickUntil('#decode-step', 1);
    assert.match(state.error, /a rolling window needs a Window under Scores/);
    await chooseRadio('decode-mode', 'single');
    assert.equal((await stepOk('#decode-step', 1)).mode, 'single');
    assert.deepEqual(page().errors(), []);
  });
});

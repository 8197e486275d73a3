// The demo page in each browser, served cross-origin isolated: the build the browser allows, fixtures loaded
// through the page's file input, the readable preset, mask painting, error messages.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before } from 'node:test';
import { compareTensors } from '../../web/demo/compare.js';
import {
  ROOT, dropFile, expectedBuild, parseTensor, readFixtureTensor, readSafetensors, resultState, runAfter,
  saveScreenshot, useDemoPage, waitForRunsAbove, writeSafetensors,
} from './harness.mjs';

// Fixtures that take different paths through the page: masks of both kinds, cross-attention with
// kdim and batch_first, F16 parameters, rows whose keys are all masked (NaN), per-head weights.
const FIXTURES = [
  'e16_h2_l7_bool_kpm_float_mask2d',
  'cross_e16_h4_l17_s7_kdim8_batch_first_kpm',
  'param_f16_e16_h2_l7_bool_kpm',
  'fully_masked_bool_mask2d_per_head',
  'unbatched_e16_h2_l7_float_mask3d',
];

useDemoPage({ query: '?threads=2' }, (demo) => {
  const { test } = demo;
  let page;
  before(() => {
    ({ page } = demo);
  });

  const chooseRadio = (name, value) => page.locator(`label:has(input[name="${name}"][value="${value}"])`).click();
  // Changes settings, then presses Run, so a run follows even when nothing changed.
  const applyAndRun = (action) => runAfter(page, async () => {
    await action();
    await page.locator('#run').click();
  });

  test('the page loads without console errors, isolated, on the build this browser allows', async () => {
    const state = await resultState(page);
    assert.equal(state.state, 'done', state.error);
    assert.deepEqual(page.errors(), []);
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), true);
    assert.equal(state.isolated, 'true');
    const expected = expectedBuild(demo.spec, true);
    assert.equal(state.build, expected.build);
    assert.equal(state.threads, expected.threadsOffReason ? '1' : '2');
    assert.match(await page.locator('#badge-build').textContent(), new RegExp(expected.build));
    assert.equal(await page.locator('#threads').isDisabled(), Boolean(expected.threadsOffReason));
    if (expected.threadsOffReason) assert.match(await page.locator('#threads-hint').textContent(), expected.threadsOffReason);
  });

  test('moving the threads slider restarts the engine with that many threads, same results', async (t) => {
    if (expectedBuild(demo.spec, true).threadsOffReason) {
      t.skip(`${demo.browser.label} has no SharedArrayBuffer: no threads (the slider is disabled, checked above)`);
      return;
    }
    const twoThreads = await resultState(page);
    const oneThread = await runAfter(page, () => page.locator('#threads').fill('1'));
    assert.equal(oneThread.threads, '1');
    assert.equal(oneThread.build, twoThreads.build);
    const same = compareTensors(parseTensor(oneThread.output), parseTensor(twoThreads.output));
    assert.ok(same.ok, same.message);
    const back = await runAfter(page, () => page.locator('#threads').fill('2'));
    assert.equal(back.threads, '2');
    assert.deepEqual(page.errors(), []);
  });

  test('the readable preset heads attend to the previous, first, same and next token', async () => {
    const { weights: json } = await resultState(page);
    const weights = parseTensor(json);
    const [, heads, l, s] = weights.shape;
    assert.deepEqual(weights.shape, [1, 4, 12, 12]);
    const targets = [(i) => Math.max(i - 1, 0), () => 0, (i) => i, (i) => Math.min(i + 1, s - 1)];
    for (let h = 0; h < heads; h++) {
      for (let i = 0; i < l; i++) {
        const row = weights.data.slice((h * l + i) * s, (h * l + i + 1) * s);
        const best = row.indexOf(Math.max(...row));
        assert.equal(best, targets[h](i), `head ${h}, query ${i}: attends key ${best}`);
      }
    }
  });

  const fixturePath = (name) => join(ROOT, 'tests/fixtures', `${name}.safetensors`);

  // The last fixture is dropped on the page instead of picked with the file input.
  for (const [i, name] of FIXTURES.entries()) {
    const how = i === FIXTURES.length - 1 ? 'dropped on the page' : 'chosen with the file input';
    test(`fixture ${name} ${how} matches PyTorch`, async () => {
      const path = fixturePath(name);
      const bytes = readFileSync(path);
      const load = how === 'dropped on the page' ? () => dropFile(page, `${name}.safetensors`, bytes) : () => page.setInputFiles('#weights-file', path);
      const state = await runAfter(page, load);
      const output = compareTensors(parseTensor(state.output), readFixtureTensor(bytes, 'expected.output'));
      assert.ok(output.ok, `output: ${output.message}`);
      const expectedWeights = readFixtureTensor(bytes, 'expected.weights');
      if (expectedWeights) {
        const weights = compareTensors(parseTensor(state.weights), expectedWeights);
        assert.ok(weights.ok, `weights: ${weights.message}`);
      }
      assert.match(await page.locator('#stat-check').textContent(), /matches/);
    });
  }

  test('a PyTorch state_dict with several attention modules loads under the chosen prefix', async () => {
    const params = Object.entries(readSafetensors(readFileSync(fixturePath('self_e16_h2_l7'))))
      .filter(([name]) => name.startsWith('param.'));
    const stateDict = {
      'encoder.layers.1.linear1.weight': { dtype: 'F32', shape: [2, 16], bytes: Buffer.alloc(2 * 16 * 4) },
      ...Object.fromEntries(params.map(([name, tensor]) => [name.replace('param.', 'encoder.layers.1.self_attn.'), tensor])),
      ...Object.fromEntries(params.map(([name, tensor]) => [name.replace('param.', 'decoder.cross_attn.'), tensor])),
    };
    const file = { name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: writeSafetensors(stateDict) };
    const state = await runAfter(page, () => page.setInputFiles('#weights-file', file));
    // The modules as lib.listAttentionModules lists them, in order.
    assert.equal(await page.locator('#prefix').inputValue(), 'decoder.cross_attn.');
    assert.deepEqual(await page.locator('#prefixes option').evaluateAll((options) => options.map((o) => o.value)),
      ['decoder.cross_attn.', 'encoder.layers.1.self_attn.']);
    assert.equal(parseTensor(state.output).shape.at(-1), 16);

    const { runs } = await resultState(page);
    await page.locator('#prefix').fill('decoder.self_attn.');
    await page.locator('#prefix').dispatchEvent('change');
    await page.waitForFunction((r) => Number(document.getElementById('result').dataset.runs) > r, runs);
    assert.match(await page.locator('#message').textContent(), /no attention module under prefix "decoder\.self_attn\."; this file has 2, e\.g\. "decoder\.cross_attn\."/);

    await runAfter(page, async () => {
      await page.locator('#prefix').fill('encoder.layers.1.self_attn.');
      await page.locator('#prefix').dispatchEvent('change');
    });
  });

  // Weight-layout fixtures (a small model's checkpoint with one module's inputs and PyTorch output):
  // fused Conv1D with a causal mask, cross-attention in BF16, and a layout only `names` loads.
  for (const name of ['gpt2_causal', 'whisper_cross_bf16', 'names_timm_fused_qkv']) {
    test(`layout fixture ${name} matches PyTorch`, async () => {
      const bytes = readFileSync(join(ROOT, 'tests/fixtures/layouts', `${name}.safetensors`));
      const state = await runAfter(page, () => dropFile(page, `${name}.safetensors`, bytes));
      const output = compareTensors(parseTensor(state.output), readFixtureTensor(bytes, 'test.expected.output'));
      assert.ok(output.ok, `output: ${output.message}`);
      assert.match(await page.locator('#stat-check').textContent(), /matches/);
    });
  }

  test('a model checkpoint (BERT-style, with I64 and BOOL buffers) lists its layers and runs the one picked', async () => {
    // The model's own tensors only, as a downloaded model.safetensors holds them.
    const model = Object.fromEntries(Object.entries(readSafetensors(readFileSync(join(ROOT, 'tests/fixtures/layouts/bert_kpm.safetensors'))))
      .filter(([name]) => !name.startsWith('test.')));
    assert.equal(model['embeddings.position_ids'].dtype, 'I64');
    const file = { name: 'model.safetensors', mimeType: 'application/octet-stream', buffer: writeSafetensors(model) };
    const layer0 = await runAfter(page, () => page.setInputFiles('#weights-file', file));
    assert.equal(await page.locator('#prefix').inputValue(), 'bert.encoder.layer.0.attention.');
    assert.match(await page.locator('#file-info').textContent(), /2 attention modules \(qkv-linear\)/);
    const layer1 = await runAfter(page, async () => {
      await page.locator('#prefix').fill('bert.encoder.layer.1.attention.');
      await page.locator('#prefix').dispatchEvent('change');
    });
    assert.deepEqual(parseTensor(layer1.output).shape, parseTensor(layer0.output).shape);
    assert.notDeepEqual(parseTensor(layer1.output).data, parseTensor(layer0.output).data, 'the layers differ');

    const { runs } = await resultState(page);
    await page.locator('#heads').fill('3');
    await page.waitForFunction((r) => Number(document.getElementById('result').dataset.runs) > r, runs);
    assert.match(await page.locator('#message').textContent(), /3 heads do not divide this module's query size 16/);
    await runAfter(page, () => page.locator('#heads').fill('2'));
  });

  for (const maskType of ['bool', 'additive']) {
    test(`painting a ${maskType} mask cell makes that weight 0`, async () => {
      const before = await applyAndRun(async () => {
        await chooseRadio('source', 'random');
        await chooseRadio('attention', 'self');
        await page.locator('#query-length').fill('12');
        await page.locator('#embed-dim').fill('32');
        await page.locator('#batch').fill('2');
        await page.locator('#causal').uncheck();
        await page.locator('#key-padding').uncheck();
        await page.locator('#need-weights').check();
        await chooseRadio('average', 'per-head');
        await page.locator('#custom-mask').check();
        await page.locator('#mask-type').selectOption(maskType);
      });
      const [row, col] = [5, 2];
      const index = (w, n, h) => ((n * w.shape[1] + h) * w.shape[2] + row) * w.shape[3] + col;
      const weightsBefore = parseTensor(before.weights);
      assert.ok(weightsBefore.data[index(weightsBefore, 1, 0)] > 0, 'the cell starts with a nonzero weight');

      const canvas = page.locator('#mask-canvas');
      const box = await canvas.boundingBox();
      const [rows, cols] = await canvas.evaluate(() => [Number(document.getElementById('query-length').value), Number(document.getElementById('key-length').value)]);
      const after = await runAfter(page, () =>
        canvas.click({ position: { x: ((col + 0.5) * box.width) / cols, y: ((row + 0.5) * box.height) / rows } }));

      const weights = parseTensor(after.weights);
      const [batch, heads, , s] = weights.shape;
      for (let n = 0; n < batch; n++) {
        for (let h = 0; h < heads; h++) {
          assert.equal(weights.data[index(weights, n, h)], 0, `batch ${n} head ${h}`);
          const start = index(weights, n, h) - col;
          const rowSum = weights.data.slice(start, start + s).reduce((a, b) => a + b, 0);
          assert.ok(Math.abs(rowSum - 1) < 1e-5, `row still sums to 1, got ${rowSum}`);
        }
      }
      assert.ok(weights.data[index(weights, 0, 0) + 1] > 0, 'the next cell is not masked');
      await applyAndRun(() => page.locator('#mask-clear').click());
    });
  }

  test('bad settings and bad files show a message, and the page recovers', async () => {
    const { runs } = await resultState(page);
    await page.locator('#heads').fill('5');
    await page.waitForFunction((r) => Number(document.getElementById('result').dataset.runs) > r, runs);
    assert.match(await page.locator('#message').textContent(), /heads \(5\) must divide embed dim \(32\)/);

    await page.setInputFiles('#weights-file', { name: 'notes.safetensors', mimeType: 'application/octet-stream', buffer: Buffer.from('not a tensor file') });
    await page.waitForFunction(() => /notes\.safetensors/.test(document.getElementById('message').textContent));
    assert.match(await page.locator('#message').textContent(), /Could not use notes\.safetensors: not a \.safetensors file/);

    const state = await runAfter(page, () => page.locator('#heads').fill('4'));
    assert.equal(state.error, '');
    assert.equal(await page.locator('#message').isHidden(), true);
    assert.deepEqual(page.errors(), []);
  });

  test('the page stays responsive during a long forward, and Stop ends it and the run queued behind it', async () => {
    await applyAndRun(async () => {
      await chooseRadio('source', 'random');
      await page.locator('#need-weights').uncheck();
      await page.locator('#custom-mask').uncheck();
      await page.locator('#embed-dim').fill('1024');
      await page.locator('#heads').fill('8');
      await page.locator('#batch').fill('8');
    });
    // A change, and Run pressed once the change's run is under way (by a user, or by this test on a
    // loaded machine, where more than the debounce's delay may pass between two calls): Run queues
    // a second run of the same settings, which Stop must drop with the first.
    const { runs } = await resultState(page);
    await page.locator('#query-length').fill('2048');
    await page.waitForFunction(() => document.getElementById('result').dataset.state !== 'pending');
    assert.equal((await resultState(page)).state, 'running', (await resultState(page)).error);
    await page.locator('#run').click();
    const lagMs = await page.evaluate(() => new Promise((resolve) => {
      const start = performance.now();
      setTimeout(() => resolve(performance.now() - start), 0);
    }));
    assert.ok(lagMs < 250, `the main thread answered after ${lagMs} ms`);
    await page.locator('#stop').click();
    const stopped = await waitForRunsAbove(page, runs);
    assert.equal(stopped.state, 'error');
    assert.match(await page.locator('#message').textContent(), /stopped/);

    const next = await applyAndRun(async () => {
      await page.locator('#need-weights').check();
      await page.locator('#embed-dim').fill('64');
      await page.locator('#heads').fill('4');
      await page.locator('#query-length').fill('12');
      await page.locator('#batch').fill('1');
    });
    assert.equal(next.state, 'done');
  });

  test('a screenshot after a run is saved', async (t) => {
    await applyAndRun(async () => {
      await chooseRadio('source', 'preset');
      await chooseRadio('attention', 'self');
      await page.locator('#embed-dim').fill('64');
      await page.locator('#batch').fill('1');
      await page.locator('#query-length').fill('16');
      await page.locator('#causal').check();
      await page.locator('#custom-mask').check();
      await page.locator('#mask-type').selectOption('bool');
    });
    const canvas = page.locator('#mask-canvas');
    const box = await canvas.boundingBox();
    const cell = box.width / 16;
    // Drag down the first column from query 10 to 15: the first-token head must look elsewhere there.
    const state = await runAfter(page, async () => {
      await page.mouse.move(box.x + cell * 0.5, box.y + cell * 10.5);
      await page.mouse.down();
      await page.mouse.move(box.x + cell * 0.5, box.y + cell * 15.5, { steps: 6 });
      await page.mouse.up();
    });
    const weights = parseTensor(state.weights);
    const at = (h, row, col) => weights.data[(h * 16 + row) * 16 + col];
    assert.ok(at(1, 9, 0) > 0.5, 'above the painted cells the first-token head still attends key 0');
    for (let row = 10; row < 16; row++) {
      for (let h = 0; h < 4; h++) assert.equal(at(h, row, 0), 0, `head ${h}, query ${row}, key 0`);
    }

    // The value under the pointer is the weight of that cell.
    const map = page.locator('#weights-maps canvas').first();
    const mapBox = await map.boundingBox();
    await map.hover({ position: { x: (2.5 * mapBox.width) / 16, y: (4.5 * mapBox.height) / 16 } });
    const tooltip = await page.locator('#tooltip').textContent();
    assert.match(tooltip, /^head 0 · previous token · query 4 → key 2: /);
    const shown = Number(tooltip.split(': ').at(-1));
    assert.ok(Math.abs(shown - at(0, 4, 2)) <= 1e-3 * Math.abs(at(0, 4, 2)), `tooltip ${shown} vs ${at(0, 4, 2)}`);

    const path = await saveScreenshot(t, page, 'demo.png');
    if (path) assert.ok(readFileSync(path).length > 10_000, 'the screenshot has content');
    assert.deepEqual(page.errors(), [], 'no console errors in the whole session');
  });
});

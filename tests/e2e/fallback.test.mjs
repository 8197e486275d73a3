// The demo served without COOP/COEP, in each browser: no SharedArrayBuffer, so the page must fall
// back to the single-thread SIMD build, say why, and still compute what PyTorch computes.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { compareTensors } from '../../web/demo/compare.js';
import { ROOT, parseTensor, readFixtureTensor, resultState, runAfter, saveScreenshot, useDemoPage } from './harness.mjs';

const FIXTURE = 'e16_h2_l7_bias_kv_zero_attn_kpm_batch_first';

useDemoPage({ isolated: false }, (demo) => {
  const { test } = demo;
  test('without COOP/COEP the page runs the single-thread simd build', async () => {
    const { page } = demo;
    const state = await resultState(page);
    assert.equal(state.state, 'done', state.error);
    assert.equal(await page.evaluate(() => self.crossOriginIsolated), false);
    assert.equal(state.isolated, 'false');
    assert.equal(state.build, 'simd');
    assert.equal(state.threads, '1');
    assert.equal(await page.locator('#threads').isDisabled(), true);
    assert.match(await page.locator('#threads-hint').textContent(), /not cross-origin isolated/);
    assert.deepEqual(page.errors(), []);
  });

  test(`fixture ${FIXTURE} still matches PyTorch on the fallback build`, async (t) => {
    const { page } = demo;
    const path = join(ROOT, 'tests/fixtures', `${FIXTURE}.safetensors`);
    const bytes = readFileSync(path);
    const state = await runAfter(page, () => page.setInputFiles('#weights-file', path));
    const output = compareTensors(parseTensor(state.output), readFixtureTensor(bytes, 'expected.output'));
    assert.ok(output.ok, `output: ${output.message}`);
    const weights = compareTensors(parseTensor(state.weights), readFixtureTensor(bytes, 'expected.weights'));
    assert.ok(weights.ok, `weights: ${weights.message}`);
    await saveScreenshot(t, page, 'demo-fallback.png');
  });
});

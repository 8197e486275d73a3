// The contract table (tests/js/helpers/contract_table.js) through the proxy in each browser, row by
// row the same as in Node's calling thread (which tests/js/contract.test.js holds to each row's
// expectation); and a module the worker cannot allocate, which JS cannot see.
import assert from 'node:assert/strict';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { CONTRACT_FIXTURE, contractTable, runContract, unexpected } from '../js/helpers/contract_table.js';
import { loadFixture } from '../js/helpers/fixtures.js';
import { titledReady, useTestPage } from './harness.mjs';

const fixture = loadFixture(CONTRACT_FIXTURE);
const rows = contractTable(fixture);

// Once in a full run, WebKitGTK with JSC_useSharedArrayBuffer=1 left this page unanswering (not
// reproduced in 8 runs of this file alone): the harness reruns such a test once on a fresh page.
useTestPage('/tests/e2e/pages/contract.html', { tests: true, ready: titledReady }, (ctx) => {
  const { test } = ctx;

  test('the contract through the proxy is the calling thread\'s, row by row', async () => {
    const { page } = ctx;
    assert.equal(await page.evaluate(() => window.contractTest.info.proxy), true);
    const proxied = await page.evaluate(() => window.contractTest.run());
    const inThread = await runContract(await loadMHA(), fixture, MHAError);
    assert.equal(proxied.length, rows.length);
    const differences = rows.flatMap(({ what, expected }, i) => {
      const wrong = unexpected(proxied[i], expected);
      return [
        ...(wrong ? [`${what}: through the proxy, ${wrong}`] : []),
        ...(JSON.stringify(proxied[i]) === JSON.stringify(inThread[i]) ? []
          : [`${what}: proxy ${JSON.stringify(proxied[i])}, in-thread ${JSON.stringify(inThread[i])}`]),
      ];
    });
    assert.deepEqual(differences, []);
  });

  test('a module the worker cannot allocate: its calls reject, then its getters throw, that error', async () => {
    const { before: known, first, after: then, later, cache } =
      await ctx.page.evaluate(() => window.contractTest.failedInWorker());
    assert.deepEqual(known.value, ['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']);
    const failure = /^createMultiheadAttention: config: not enough memory for the parameters$/;
    for (const error of [first, then, later, cache]) {
      assert.ok(error.mhaError, JSON.stringify(error));
      assert.match(error.message, failure);
    }
  });

  test('no uncaught errors on the page', () => {
    assert.deepEqual(ctx.page.errors(), []);
  });
});

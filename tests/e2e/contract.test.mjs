// The contract table (tests/js/helpers/contract_table.js) through the proxy in each browser, row by
// row the same as in Node's calling thread (which tests/js/contract.test.js holds to each row's
// expectation); and a module the worker cannot allocate, which JS cannot see.
import assert from 'node:assert/strict';
import { after, before, beforeEach, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { CONTRACT_FIXTURE, contractTable, runContract, unexpected } from '../js/helpers/contract_table.js';
import { loadFixture } from '../js/helpers/fixtures.js';
import { forEachBrowser, startServer } from './harness.mjs';

const fixture = loadFixture(CONTRACT_FIXTURE);
const rows = contractTable(fixture);

forEachBrowser((ctx) => {
  let server;
  let page;

  const openPage = async () => {
    await page.goto(`${server.origin}/tests/e2e/pages/contract.html`);
    await page.waitForFunction(() => document.title === 'ready', null, { timeout: 60_000 });
  };

  before(async () => {
    ({ page } = ctx);
    server = await startServer(ctx.browser, { tests: true });
    await openPage();
  });
  // After a test that found the page stuck, the next ones get it afresh.
  beforeEach(async () => {
    if (page.control.timedOut) await openPage();
  });

  after(() => server?.stop());

  test('the contract through the proxy is the calling thread\'s, row by row', async (t) => {
    assert.equal(await page.evaluate(() => window.contractTest.info.proxy), true);
    // Once in a full run, WebKitGTK with JSC_useSharedArrayBuffer=1 left this page unanswering
    // (not reproduced in 8 runs of this file alone): a stuck page is reopened and the table run
    // once more, and the test says so; a second stall fails.
    let proxied;
    try {
      proxied = await page.evaluate(() => window.contractTest.run());
    } catch (error) {
      if (!page.control.timedOut) throw error;
      t.diagnostic(`retried on a fresh page: ${error.message}`);
      await openPage();
      proxied = await page.evaluate(() => window.contractTest.run());
    }
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
      await page.evaluate(() => window.contractTest.failedInWorker());
    assert.deepEqual(known.value, ['in_proj_weight', 'in_proj_bias', 'out_proj.weight', 'out_proj.bias']);
    const failure = /^createMultiheadAttention: config: not enough memory for the parameters$/;
    for (const error of [first, then, later, cache]) {
      assert.ok(error.mhaError, JSON.stringify(error));
      assert.match(error.message, failure);
    }
  });

  test('no uncaught errors on the page', () => {
    assert.deepEqual(page.errors(), []);
  });
});

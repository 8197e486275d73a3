// The contract table (helpers/contract_table.js) in the calling thread, each row as expected, and
// through Node's proxy and in a worker_threads worker, row by row the same; the proxy's run in the
// browsers is tests/e2e/contract.test.mjs. Plus the failed create that JS cannot see (out of
// memory): in the calling thread it throws, through the proxy its calls reject and then its
// getters throw; and every method the proxy forwards as a call or a load (proxy_table.js), which
// returns a Promise: given arguments it refuses, it rejects and does not throw.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { before, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { PROXIED } from '../../web/src/proxy_table.js';
import {
  CONTRACT_FIXTURE, contractTable, runContract, unexpected,
} from './helpers/contract_table.js';
import { moduleConfig } from './helpers/fixture_data.js';
import { loadFixture } from './helpers/fixtures.js';

const fixture = loadFixture(CONTRACT_FIXTURE);
const rows = contractTable(fixture);

const WORKER_SOURCE = `
import { parentPort } from 'node:worker_threads';
import { MHAError, loadMHA } from ${JSON.stringify(new URL('../../web/src/index.js', import.meta.url).href)};
import { runContract } from ${JSON.stringify(new URL('./helpers/contract_table.js', import.meta.url).href)};
import { loadFixture } from ${JSON.stringify(new URL('./helpers/fixtures.js', import.meta.url).href)};
const lib = await loadMHA();
parentPort.postMessage(await runContract(lib, loadFixture(${JSON.stringify(CONTRACT_FIXTURE)}), MHAError));
`;

describe('the contract in the calling thread', () => {
  let outcomes;
  before(async () => {
    outcomes = await runContract(await loadMHA(), fixture, MHAError);
  });

  rows.forEach(({ what, expected }, i) => {
    test(what, () => assert.equal(unexpected(outcomes[i], expected), '', JSON.stringify(outcomes[i])));
  });

  test('row by row the same through the proxy in Node (loadMHA({ proxy: true }))', async () => {
    const lib = await loadMHA({ proxy: true });
    assert.equal(lib.info.proxy, true);
    const proxied = await runContract(lib, fixture, MHAError);
    lib.dispose();
    assert.equal(proxied.length, outcomes.length);
    proxied.forEach((outcome, i) => assert.deepEqual(outcome, outcomes[i], rows[i].what));
  });

  test('row by row the same in a worker_threads worker', async () => {
    const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(WORKER_SOURCE)}`));
    const [inWorker] = await once(worker, 'message');
    await worker.terminate();
    assert.equal(inWorker.length, outcomes.length);
    inWorker.forEach((outcome, i) => assert.deepEqual(outcome, outcomes[i], rows[i].what));
  });
});

test('a module the core cannot allocate: create throws at once', async () => {
  const lib = await loadMHA();
  // 3 * 20000^2 floats: more than a 32-bit vector holds, refused before any allocation.
  assert.throws(() => lib.createMultiheadAttention({ embedDim: 20000, numHeads: 8 }),
    (error) => error instanceof MHAError &&
      /^createMultiheadAttention: config: not enough memory for the parameters$/.test(error.message));
});

test('a module the worker cannot allocate, through the proxy in Node: its calls reject, then its getters throw, that error', async () => {
  const lib = await loadMHA({ proxy: true });
  const mha = lib.createMultiheadAttention({ embedDim: 20000, numHeads: 8 });
  assert.equal(mha.parameters.length, 4);
  const failure = (error) => error instanceof MHAError &&
    /^createMultiheadAttention: config: not enough memory for the parameters$/.test(error.message);
  await assert.rejects(mha.loadStateDict({}), failure);
  assert.throws(() => mha.parameters, failure);
  await assert.rejects(mha.loadStateDict({}), failure);
  assert.throws(() => mha.createKVCache({ batchSize: 1, maxLength: 4 }), failure);
  lib.dispose();
});

test('every Promise method, given arguments it refuses or disposed, rejects with an MHAError and does not throw', async () => {
  const lib = await loadMHA();
  const mha = lib.createMultiheadAttention(moduleConfig(fixture.config));
  const cache = mha.createKVCache({ batchSize: 1, maxLength: 4 });
  const objects = { MHALibrary: lib, MultiheadAttention: mha, KVCache: cache };
  const refused = [Symbol('bad'), null, 'x'];
  // Its calls and loads (whose entries hold their check).
  const checks = (type) => ({ ...PROXIED[type].calls,
    ...Object.fromEntries(Object.entries(PROXIED[type].loads).map(([method, { check }]) => [method, check])) });
  const calls = (type, object) => Object.entries(checks(type)).flatMap(([method, check]) =>
    (check === null ? [] : [[`${type}.${method}`, () => object[method](...refused)]]));
  const live = Object.entries(objects).flatMap(([type, object]) => calls(type, object));
  mha.dispose();
  cache.dispose();
  const disposed = ['MultiheadAttention', 'KVCache'].flatMap((type) =>
    Object.keys(checks(type)).map((method) =>
      [`${type}.${method} disposed`, () => objects[type][method]()]));
  assert.ok(live.length >= 11 && disposed.length >= 11);
  for (const [what, call] of [...live, ...disposed]) {
    let returned;
    assert.doesNotThrow(() => { returned = call(); }, what);
    assert.ok(returned instanceof Promise, what);
    await assert.rejects(returned, MHAError, what);
  }
});

// The package inside a worker thread, as a page would run it in a Web Worker.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { BUILDS } from './helpers/builds.js';
import { assertMatchesFixture, loadFixture } from './helpers/fixtures.js';

const FIXTURE = 'e16_h2_l7_bool_kpm.safetensors';

// Runs the fixture in a worker and posts back the result.
const WORKER_SOURCE = `
import { parentPort, workerData } from 'node:worker_threads';
import { loadMHA } from ${JSON.stringify(new URL('../../web/src/index.js', import.meta.url).href)};
import { loadFixture, runFixture } from ${JSON.stringify(new URL('./helpers/fixtures.js', import.meta.url).href)};
const lib = await loadMHA({ build: workerData.build });
const result = await runFixture(lib, loadFixture(workerData.fixture));
parentPort.postMessage({ info: lib.info, result });
`;

describe('in a worker thread', () => {
  for (const build of BUILDS) {
    test(build, async () => {
      const worker = new Worker(new URL(`data:text/javascript,${encodeURIComponent(WORKER_SOURCE)}`),
        { workerData: { build, fixture: FIXTURE } });
      const [{ info, result }] = await once(worker, 'message');
      assert.equal(info.build, build);
      assertMatchesFixture(result, loadFixture(FIXTURE));
      await worker.terminate();
    });
  }
});

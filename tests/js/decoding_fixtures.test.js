// Every decoding fixture (KV cache schedules from PyTorch) through the JS
// API, on both WASM builds.
import { before, describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { checkDecoding, decodingFixtures } from './helpers/decoding.js';
import { runDecoding } from './helpers/decoding_run.js';

const fixtures = decodingFixtures();

for (const build of BUILDS) {
  describe(`decoding fixtures on ${build}`, () => {
    let lib;
    before(async () => { lib = await loadMHA({ build }); });
    for (const fixture of fixtures) {
      test(fixture.name, async () => checkDecoding(fixture, await runDecoding(lib, fixture)));
    }
  });
}

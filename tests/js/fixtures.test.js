// Every committed PyTorch fixture through the JS API, on both WASM builds.
import { before, describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import {
  assertMatchesFixture, fixtureNames, loadFixture, runFixture,
} from './helpers/fixtures.js';

const fixtures = fixtureNames().map(loadFixture);

for (const build of BUILDS) {
  describe(`fixtures on ${build}`, () => {
    let lib;
    before(async () => { lib = await loadMHA({ build }); });

    for (const fixture of fixtures) {
      test(fixture.name, async () => {
        assertMatchesFixture(await runFixture(lib, fixture), fixture);
      });
      const f32Params = fixture.config.kind === 'mha' && fixture.config.param_dtype === 'F32';
      if (f32Params) {
        test(`${fixture.name} via loadStateDict`, async () => {
          assertMatchesFixture(await runFixture(lib, fixture, 'stateDict'), fixture);
        });
      }
    }
  });
}

// The table-driven suite shared by the bad-input and hostile-input tests: on
// each build, one module loaded from `fixture`; every [what, (ctx) => call,
// patterns] must reject with an MHAError whose message matches each pattern,
// every [what, (ctx) => call, check] must resolve to something `check`
// accepts, and after each the same module must still reproduce the fixture.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../../web/src/index.js';
import { BUILDS } from './builds.js';
import { assertMatchesFixture, moduleConfig } from './fixtures.js';

export function errorTableSuite(title, fixture, errors, results = []) {
  const input = (name) => {
    const t = fixture.tensors[`input.${name}`];
    return { data: t.data, shape: t.shape };
  };
  const [query, key, value, keyPaddingMask] =
    ['query', 'key', 'value', 'key_padding_mask'].map(input);

  for (const build of BUILDS) {
    describe(`${title} on ${build}`, () => {
      const ctx = {};
      before(async () => {
        ctx.lib = await loadMHA({ build });
        ctx.mha = ctx.lib.createMultiheadAttention(moduleConfig(fixture.config));
        ctx.mha.loadSafetensors(fixture.bytes, { prefix: 'param.' });
      });
      after(() => ctx.mha.dispose());

      const validForward = async () => {
        assertMatchesFixture(await ctx.mha.forward(query, key, value, { keyPaddingMask }), fixture);
      };

      for (const [what, badCall, patterns] of errors) {
        test(what, async () => {
          await assert.rejects(async () => badCall(ctx), (error) => {
            assert.ok(error instanceof MHAError, `expected an MHAError, got ${error}`);
            for (const pattern of patterns) assert.match(error.message, pattern);
            return true;
          });
          await validForward();
        });
      }

      for (const [what, call, check] of results) {
        test(what, async () => {
          check(await call(ctx));
          await validForward();
        });
      }
    });
  }
}

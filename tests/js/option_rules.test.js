// One source for the numeric options' rules and the sizes refused (issue 33 item 7): the core's
// table (src/core/option_rules.cc) is what web/src/option_rules.js holds, in every build, and the JS
// checks that read that file refuse exactly the values the core refuses, with its message.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { optionRulesOf } from '../../scripts/option_rules.mjs';
import { checkOptionRule } from '../../web/src/config.js';
import { loadMHA } from '../../web/src/index.js';
import { wasmOf } from '../../web/src/library.js';
import { OPTION_RULES } from '../../web/src/option_rules.js';
import { BUILDS } from './helpers/builds.js';

const FILE = new URL('../../web/src/option_rules.js', import.meta.url);

// Around each bound, past float32's range, and what rounds to 0 or to the bound as a float32
// (1 - 1e-9 is 1 as a float32, 0.99999994 the float32 below it).
const VALUES = [-Infinity, -1e39, -3.4e38, -1, -1e-46, -0, 0, 1e-46, 1e-45, 0.125, 0.99999994,
  1 - 1e-9, 1, 3.4e38, 1e39, Infinity, NaN];

test('web/src/option_rules.js is the core\'s table, in every build', async () => {
  for (const build of BUILDS) {
    const wasm = wasmOf(await loadMHA({ build }));
    assert.equal(readFileSync(FILE, 'utf8'), optionRulesOf(wasm),
      `${build}: web/src/option_rules.js is stale: run node scripts/option_rules.mjs`);
  }
});

test('the JS checks refuse the values the core refuses, with its message', async () => {
  const wasm = wasmOf(await loadMHA({ build: 'simd' }));
  const calls = new Set(OPTION_RULES.map(({ call }) => call));
  assert.deepEqual([...calls].sort(), ['module', 'sdpa']);
  for (const { call, name } of OPTION_RULES) {
    for (const value of VALUES) {
      let js = '';
      checkOptionRule(call, name, value, (message) => { js = message; });
      // The core says 'got <the float32 it received>', JS 'received <the number given>'.
      const core = wasm.checkOption(call, name, value);
      assert.equal(js.replace(/, received .*$/, ''), core.replace(/, got .*$/, ''),
        `${call} ${name} ${value}: JS '${js}', core '${core}'`);
    }
  }
});

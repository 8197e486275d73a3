// The decoding fixtures (tests/fixtures/decoding/README.md) in Node, and the
// check of a schedule's results (helpers/decoding_run.js) against them.
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { fixtureFromBytes } from './fixture_data.js';
import { assertClose } from './fixtures.js';

const DIRS = ['decoding', 'models', 'generation'];
// 16-bit storage: the fixtures' references round keys and values as the
// cache does (from float64 rather than float32 projections).
const SLACK = { float16: 4, bfloat16: 4 };

// tests/fixtures/decoding, then tests/fixtures/models (the same format, with
// the score options of today's models in the config) and tests/fixtures/generation
// (positions, rolling caches); `path` is under tests/fixtures.
export function decodingFixtures() {
  return DIRS.flatMap((dir) => {
    const url = new URL(`../../fixtures/${dir}/`, import.meta.url);
    return readdirSync(url).filter((f) => f.endsWith('.safetensors')).sort()
      .map((name) => Object.assign(
        fixtureFromBytes(name, new Uint8Array(readFileSync(new URL(name, url)))),
        { path: `${dir}/${name}` }));
  });
}

// Every step's output, weights and cache length as the fixture has them, and the keys the
// cache holds (a rolling cache's stop at maxLength; truncating drops the newest; a
// StreamingLLM cache's length is what it holds).
export function checkDecoding(fixture, results) {
  const c = fixture.config;
  const slack = SLACK[c.dtype] ?? 1;
  assert.equal(results.length, c.steps.length);
  let length = 0;
  let held = 0;
  for (const [i, step] of c.steps.entries()) {
    const expected = (name) => fixture.tensors[`step${i}.${name}`];
    const r = results[i];
    if (step.truncate >= 0) {
      held = Math.max(0, held - (length - step.truncate));
      length = step.truncate;
    } else if (!step.reorder) {
      const keys = step.self ? expected('query') : expected('key');
      const batchFirst = c.batch_first && c.batched;
      const added = !keys ? 0 : c.mode === 'sdpa' ? keys.shape[2] : keys.shape[batchFirst ? 1 : 0];
      length += added;
      held = Math.min(held + added, c.max_length);
      if (c.keep !== undefined) length = held;  // a StreamingLLM cache counts what it holds
      assertClose(r.output, expected('output'), `${fixture.name} step ${i} output`, slack);
      if (step.need_weights) {
        assertClose(r.weights, expected('weights'), `${fixture.name} step ${i} weights`, slack);
      } else {
        assert.equal(r.weights, null);
      }
    }
    assert.equal(r.length, length, `${fixture.name} step ${i}: cache length`);
    assert.equal(r.held, held, `${fixture.name} step ${i}: keys held`);
  }
}

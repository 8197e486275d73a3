// The weight-layout fixtures read from tests/fixtures/layouts (Node), and a
// case's float tensors as a state_dict.
import { readFileSync, readdirSync } from 'node:fs';
import { layoutFixtureFromShards } from './layout_fixture_data.js';

export {
  expectedOutput, layoutModuleConfig, runLayoutForward, weightOptions,
} from './layout_fixture_data.js';

const LAYOUT_DIR = new URL('../../fixtures/layouts/', import.meta.url);
const SHARD_SUFFIX = /-\d{5}-of-\d{5}$/;

function caseName(file) {
  return file.replace(/\.safetensors$/, '').replace(SHARD_SUFFIX, '');
}

// Every case, its shards in order.
export function layoutFixtures() {
  const files = readdirSync(LAYOUT_DIR).filter((f) => f.endsWith('.safetensors')).sort();
  return [...new Set(files.map(caseName))].map((name) => layoutFixtureFromShards(name,
    files.filter((f) => caseName(f) === name)
      .map((f) => new Uint8Array(readFileSync(new URL(f, LAYOUT_DIR))))));
}

export function layoutFixture(name) {
  return layoutFixtures().find((f) => f.name === name);
}

// The F32 tensors as a state_dict of {data, shape}.
export function layoutStateDict(fixture) {
  return Object.fromEntries(Object.entries(fixture.tensors).filter(([, t]) => t.dtype === 'F32')
    .map(([name, t]) => [name, { data: t.data, shape: t.shape }]));
}

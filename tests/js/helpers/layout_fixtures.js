// The weight-layout fixtures (tests/fixtures/layouts/README.md): a model's
// checkpoint, whole or in shards, with the test's inputs and the PyTorch
// module's output under "test.".
import { readFileSync, readdirSync } from 'node:fs';
import { readSafetensors } from './safetensors.js';

const LAYOUT_DIR = new URL('../../fixtures/layouts/', import.meta.url);
const SHARD_SUFFIX = /-\d{5}-of-\d{5}$/;

function caseName(file) {
  return file.replace(/\.safetensors$/, '').replace(SHARD_SUFFIX, '');
}

// [{name, shards: [Uint8Array], config, tensors}], tensors of all shards.
export function layoutFixtures() {
  const files = readdirSync(LAYOUT_DIR).filter((f) => f.endsWith('.safetensors')).sort();
  return [...new Set(files.map(caseName))].map((name) => {
    const shards = files.filter((f) => caseName(f) === name)
      .map((f) => new Uint8Array(readFileSync(new URL(f, LAYOUT_DIR))));
    const parts = shards.map(readSafetensors);
    return {
      name,
      shards,
      config: JSON.parse(parts[0].metadata.config),
      tensors: Object.assign({}, ...parts.map((p) => p.tensors)),
    };
  });
}

export function layoutFixture(name) {
  return layoutFixtures().find((f) => f.name === name);
}

// The engine's options for the case's module.
export function layoutModuleConfig({ module: m }) {
  return {
    embedDim: m.embed_dim, numHeads: m.num_heads, bias: m.bias, kdim: m.kdim || undefined,
    vdim: m.vdim || undefined, qkHeadDim: m.qk_head_dim || undefined,
    vHeadDim: m.v_head_dim || undefined, batchFirst: m.batch_first,
  };
}

// { prefix, layout, names } as the case loads its module.
export function weightOptions({ config }) {
  return { prefix: config.prefix, layout: config.layout ?? undefined, names: config.names };
}

function input(fixture, name) {
  const t = fixture.tensors[`test.${name}`];
  return t && { data: t.data, shape: t.shape };
}

// The module's forward on the case's inputs.
export function runLayoutForward(mha, fixture) {
  return mha.forward(input(fixture, 'input.query'), input(fixture, 'input.key'),
    input(fixture, 'input.value'), {
      keyPaddingMask: input(fixture, 'input.key_padding_mask'),
      isCausal: fixture.config.is_causal, needWeights: false,
    });
}

export function expectedOutput(fixture) {
  return input(fixture, 'expected.output');
}

// The F32 tensors as a state_dict of {data, shape}.
export function layoutStateDict(fixture) {
  return Object.fromEntries(Object.entries(fixture.tensors).filter(([, t]) => t.dtype === 'F32')
    .map(([name, t]) => [name, { data: t.data, shape: t.shape }]));
}

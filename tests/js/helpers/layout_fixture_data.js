// A weight-layout fixture (tests/fixtures/layouts/README.md) from its shards'
// bytes, and how a case loads and runs: no Node modules, so that browser
// tests use it too.
import { readSafetensors } from './safetensors.js';

// {name, shards, config, tensors}: tensors of all shards.
export function layoutFixtureFromShards(name, shards) {
  const parts = shards.map(readSafetensors);
  return {
    name,
    shards,
    config: JSON.parse(parts[0].metadata.config),
    tensors: Object.assign({}, ...parts.map((p) => p.tensors)),
  };
}

// The engine's options for the case's module.
export function layoutModuleConfig({ module: m }) {
  return {
    embedDim: m.embed_dim, numHeads: m.num_heads, bias: m.bias, kdim: m.kdim || undefined,
    vdim: m.vdim || undefined, qkHeadDim: m.qk_head_dim || undefined,
    vHeadDim: m.v_head_dim || undefined, batchFirst: m.batch_first,
    numKVHeads: m.num_kv_heads || undefined,
    rotary: m.rotary ? { ...m.rotary, dim: m.rotary.dim || undefined } : undefined,
    // The score options a family needs (BLOOM's alibi: true, T5's scale 1).
    alibi: m.alibi || undefined, scale: m.scale,
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

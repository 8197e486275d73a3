// Turns a dropped .safetensors file into what the page needs: the module config, the options for
// mha.loadSafetensors ({ prefix, layout, names }) and, for the project's fixtures, the stored
// inputs, masks and expectations. Which attention modules a model's file holds comes from the
// engine (lib.listAttentionModules, asked once when the file is loaded).
import { parseSafetensors, toApiTensor } from './safetensors-file.js';

function configFromFixture(json) {
  const c = JSON.parse(json);
  if (c.kind !== 'mha') {
    throw new Error(`this fixture is of kind "${c.kind}"; the demo runs nn.MultiheadAttention ("mha") fixtures`);
  }
  return {
    config: {
      embedDim: c.embed_dim, numHeads: c.num_heads, bias: c.bias, addBiasKV: c.add_bias_kv,
      addZeroAttn: c.add_zero_attn, kdim: c.kdim || undefined, vdim: c.vdim || undefined,
      batchFirst: c.batch_first, qkHeadDim: c.qk_head_dim || undefined, vHeadDim: c.v_head_dim || undefined,
    },
    options: { needWeights: c.need_weights, averageAttnWeights: c.average_attn_weights, isCausal: c.is_causal },
  };
}

// What a listed module's shapes say; heads cannot be read from shapes, so they come from the
// page's control.
function configFromModule(module, numHeads) {
  const { embedDim, kdim, vdim, qSize, kSize, vSize } = module;
  if (qSize % numHeads !== 0 || vSize % numHeads !== 0) {
    throw new Error(`${numHeads} heads do not divide this module's query size ${qSize} and value size ${vSize}; set Heads to the model's num_attention_heads`);
  }
  // Grouped-query heads: keys and values have qSize / kSize times fewer heads.
  const numKVHeads = numHeads * kSize / qSize;
  if (!Number.isInteger(numKVHeads) || numHeads % numKVHeads !== 0) {
    throw new Error(`${numHeads} heads do not fit this module's key size ${kSize} (query size ${qSize}): its key/value heads must divide its heads`);
  }
  const config = { embedDim, numHeads, bias: module.bias, addBiasKV: module.biasKV, addZeroAttn: false, batchFirst: false };
  if (numKVHeads !== numHeads) config.numKVHeads = numKVHeads;
  if (kdim !== embedDim) config.kdim = kdim;
  if (vdim !== embedDim) config.vdim = vdim;
  if (qSize !== embedDim) config.qkHeadDim = qSize / numHeads;
  if (vSize !== embedDim) config.vHeadDim = vSize / numHeads;
  return config;
}

// The module under `prefix` (the first one when null) among those listed.
function chooseModule(fileName, modules, prefix, tensorCount) {
  if (modules.length === 0) {
    throw new Error(`${fileName} holds no attention module in a layout the engine knows (torch, qkv-linear, gpt2) among its ${tensorCount} tensors`);
  }
  const module = prefix === null ? modules[0] : modules.find((m) => m.prefix === prefix);
  if (!module) {
    const known = modules.slice(0, 4).map((m) => `"${m.prefix}"`).join(', ');
    throw new Error(`no attention module under prefix "${prefix}"; this file has ${modules.length}, e.g. ${known}`);
  }
  return module;
}

function fixtureTensor(tensors, name) {
  return tensors[name] ? toApiTensor(name, tensors[name]) : undefined;
}

function fixtureInputs(tensors, prefix) {
  const t = (name) => fixtureTensor(tensors, prefix + name);
  return {
    inputs: { query: t('input.query'), key: t('input.key'), value: t('input.value') },
    masks: { keyPaddingMask: t('input.key_padding_mask'), attnMask: t('input.attn_mask') },
    expected: { output: t('expected.output'), weights: t('expected.weights') },
  };
}

// A weight-layout fixture (tests/fixtures/layouts): a model's checkpoint with one module's
// inputs and PyTorch output under "test.".
function describeLayoutFixture(fileName, bytes, c, tensors) {
  const m = c.module;
  const { inputs, masks, expected } = fixtureInputs(tensors, 'test.');
  return {
    fileName, bytes, prefix: c.prefix, prefixes: [{ prefix: c.prefix, layout: c.detected ?? 'names' }],
    load: { prefix: c.prefix, layout: c.layout ?? undefined, names: c.names },
    config: {
      embedDim: m.embed_dim, numHeads: m.num_heads, bias: m.bias, kdim: m.kdim || undefined, vdim: m.vdim || undefined,
      batchFirst: m.batch_first, qkHeadDim: m.qk_head_dim || undefined, vHeadDim: m.v_head_dim || undefined,
    },
    fixture: { inputs, options: { ...masks, needWeights: false, isCausal: c.is_causal, averageAttnWeights: true }, expected },
  };
}

// prefix: the user's choice, or null to pick one; modules: lib.listAttentionModules(bytes).
// Throws a readable Error for files it cannot use.
export function describeWeightsFile(fileName, bytes, { prefix, numHeads, modules }) {
  const { metadata, tensors } = parseSafetensors(bytes);
  const kind = metadata.config && JSON.parse(metadata.config).kind;
  if (kind === 'layout') return describeLayoutFixture(fileName, bytes, JSON.parse(metadata.config), tensors);
  if (metadata.config) {
    const { config, options } = configFromFixture(metadata.config);
    const { inputs, masks, expected } = fixtureInputs(tensors, '');
    return {
      fileName, bytes, prefix: 'param.', prefixes: [{ prefix: 'param.', layout: 'torch' }], config,
      load: { prefix: 'param.' },
      fixture: tensors['input.query'] && { inputs, options: { ...options, ...masks }, expected },
    };
  }
  const module = chooseModule(fileName, modules, prefix, Object.keys(tensors).length);
  return {
    fileName, bytes, prefix: module.prefix, prefixes: modules,
    load: { prefix: module.prefix, layout: module.layout, names: module.names },
    config: configFromModule(module, numHeads), fixture: null,
  };
}

// Turns a dropped .safetensors file into what the page needs: the module config, the prefix for
// mha.loadSafetensors and, for the project's fixtures, the stored inputs, masks and expectations.
import { parseSafetensors, toApiTensor } from './safetensors-file.js';

const PROJECTION_NAMES = ['in_proj_weight', 'q_proj_weight'];

// Prefixes of every attention module in the file, e.g. ['layers.0.self_attn.', 'layers.1.self_attn.'].
function findPrefixes(names) {
  const prefixes = new Set();
  for (const name of names) {
    for (const suffix of PROJECTION_NAMES) {
      if (name.endsWith(suffix)) prefixes.add(name.slice(0, -suffix.length));
    }
  }
  return [...prefixes];
}

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

// What a plain state_dict says about the module; heads cannot be read from shapes, so they come
// from the page's control.
function configFromStateDict(tensors, prefix, numHeads) {
  const shapeOf = (name) => tensors[prefix + name]?.shape;
  const outProj = shapeOf('out_proj.weight');
  if (!outProj || !(shapeOf('in_proj_weight') || shapeOf('q_proj_weight'))) {
    throw new Error(`no nn.MultiheadAttention weights under prefix "${prefix}" (looked for ${prefix}in_proj_weight or ${prefix}q_proj_weight, and ${prefix}out_proj.weight)`);
  }
  const embedDim = outProj[0];
  const config = {
    embedDim, numHeads, bias: Boolean(shapeOf('in_proj_bias')), addBiasKV: Boolean(shapeOf('bias_k')),
    addZeroAttn: false, batchFirst: false,
  };
  const [q, k, v] = ['q_proj_weight', 'k_proj_weight', 'v_proj_weight'].map(shapeOf);
  if (q && k && v) {
    if (k[1] !== embedDim) config.kdim = k[1];
    if (v[1] !== embedDim) config.vdim = v[1];
    if (q[0] !== embedDim) config.qkHeadDim = q[0] / numHeads;
    if (v[0] !== embedDim) config.vHeadDim = v[0] / numHeads;
  }
  return config;
}

function fixtureTensor(tensors, name) {
  return tensors[name] ? toApiTensor(name, tensors[name]) : undefined;
}

// prefix: the user's choice, or null to pick one. Throws a readable Error for files it cannot use.
export function describeWeightsFile(fileName, bytes, { prefix, numHeads }) {
  const { metadata, tensors } = parseSafetensors(bytes);
  const names = Object.keys(tensors);
  if (metadata.config) {
    const { config, options } = configFromFixture(metadata.config);
    return {
      fileName, bytes, prefix: prefix ?? 'param.', prefixes: ['param.'], config,
      fixture: tensors['input.query'] && {
        inputs: {
          query: fixtureTensor(tensors, 'input.query'),
          key: fixtureTensor(tensors, 'input.key'),
          value: fixtureTensor(tensors, 'input.value'),
        },
        options: {
          ...options,
          keyPaddingMask: fixtureTensor(tensors, 'input.key_padding_mask'),
          attnMask: fixtureTensor(tensors, 'input.attn_mask'),
        },
        expected: { output: fixtureTensor(tensors, 'expected.output'), weights: fixtureTensor(tensors, 'expected.weights') },
      },
    };
  }
  const prefixes = findPrefixes(names);
  if (prefixes.length === 0) {
    throw new Error(`${fileName} holds no nn.MultiheadAttention weights (no tensor named *in_proj_weight or *q_proj_weight among ${names.length})`);
  }
  const chosen = prefix ?? prefixes[0];
  return { fileName, bytes, prefix: chosen, prefixes, config: configFromStateDict(tensors, chosen, numHeads), fixture: null };
}

// Runs a decoding fixture's schedule (tests/fixtures/decoding/README.md) on
// one KV cache through the JS API, in Node or in a page (no Node modules):
// returns each step's results and the cache's length and held after it.
import { moduleConfig } from './fixture_data.js';

// The score options and q/k norms of a fixture's config (model fixtures; absent or 0: off),
// for the module or, with `fixture`, the functional form (sinks and ALiBi
// slopes as Float32Arrays).
function scoreOptions(c, fixture) {
  const options = {};
  if (c.sinks) options.sinks = fixture ? fixture.tensors['param.sinks'].data : true;
  const slopes = c.alibi?.slopes && Float32Array.from(c.alibi.slopes);
  if (fixture && slopes) {
    options.alibiSlopes = slopes;
  } else if (c.alibi != null) {
    options.alibi = c.alibi === true ? true : { ...c.alibi, slopes };
  }
  if (c.scale) options.scale = c.scale;
  if (c.softcap) options.softcap = c.softcap;
  if (c.window != null) options.window = c.window;
  if (c.qk_norm) {
    const { type, over, eps, weight_offset: weightOffset } = c.qk_norm;
    options.qkNorm = { type, over, eps, weightOffset };
  }
  return options;
}

// The fixture's rotary dict as the JS option: inv_freq as a Float32Array.
function rotaryOption({ inv_freq: invFreq, attention_factor: attentionFactor, ...rest }) {
  return { ...rest, ...(invFreq && { invFreq: Float32Array.from(invFreq) }),
    ...(attentionFactor !== undefined && { attentionFactor }) };
}

async function makeCache(lib, fixture) {
  const c = fixture.config;
  if (c.mode !== 'sdpa') {
    const config = { ...moduleConfig(c), numKVHeads: c.num_kv_heads || undefined,
      ...scoreOptions(c) };
    if (c.rotary) config.rotary = rotaryOption(c.rotary);
    const mha = lib.createMultiheadAttention(config);
    await mha.loadSafetensors(fixture.bytes, { prefix: 'param.' });
    return { mha, cache: mha.createKVCache({ batchSize: c.batch_size, maxLength: c.max_length,
      dtype: c.dtype, rolling: c.keep !== undefined ? { keep: c.keep } : c.rolling ?? false }) };
  }
  const [, numKVHeads, , headDim] = fixture.tensors['step0.key'].shape;
  const vHeadDim = fixture.tensors['step0.value'].shape[3];
  return { mha: null, cache: lib.createKVCache({ batchSize: c.batch_size, numKVHeads, headDim,
    vHeadDim, maxLength: c.max_length, dtype: c.dtype, rolling: c.rolling ?? false }) };
}

// [{ output, weights, length, held }] per step (a truncation or a reorder gives only its
// length and held).
export async function runDecoding(lib, fixture) {
  const c = fixture.config;
  const { mha, cache } = await makeCache(lib, fixture);
  const tensor = (name) => fixture.tensors[name] &&
    { data: fixture.tensors[name].data, shape: fixture.tensors[name].shape };
  const results = [];
  try {
    for (const [i, step] of c.steps.entries()) {
      if (step.truncate >= 0 || step.reorder) {
        await (step.reorder ? cache.reorder(Int32Array.from(step.reorder)) : cache.truncate(step.truncate));
        results.push({ length: cache.length, held: cache.held });
        continue;
      }
      const t = (name) => tensor(`step${i}.${name}`);
      const query = t('query');
      const key = step.self ? query : t('key') ?? null;
      const value = step.self ? query : t('value') ?? null;
      let result;
      if (mha === null) {
        result = { output: await lib.scaledDotProductAttention(query, key, value,
          { cache, isCausal: step.is_causal, enableGqa: c.enable_gqa,
            ...scoreOptions(c, fixture) }),
        weights: null };
      } else {
        // Generation fixtures: positions as F32 integers.
        const positions = t('positions') && Int32Array.from(t('positions').data);
        result = await mha.forward(query, key, value, {
          ...(positions && { positions }),
          cache, isCausal: step.is_causal, needWeights: step.need_weights,
          averageAttnWeights: step.average_attn_weights,
          keyPaddingMask: t('key_padding_mask'), attnMask: t('attn_mask'),
        });
      }
      results.push({ ...result, length: cache.length, held: cache.held });
    }
  } finally {
    cache.dispose();
    mha?.dispose();
  }
  return results;
}

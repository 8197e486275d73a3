// Builds one forward request from the page's settings: module config, weights, inputs, masks, and
// what the views need to know to draw the results. Bad settings throw Errors meant for people.
import { buildPreset, presetHeadNames } from './preset-weights.js';
import { createRng, normalTensor, randomStateDict } from './random.js';
import { scoreOptions } from './score-options.js';

const LIMITS = {
  embedDim: [1, 2048], numHeads: [1, 256], queryLength: [1, 2048], keyLength: [1, 2048], batch: [1, 64],
  repeats: [1, 100], seed: [0, 2 ** 32 - 1],
};
const LABELS = {
  embedDim: 'embed dim', numHeads: 'heads', queryLength: 'query length L', keyLength: 'key length S', batch: 'batch',
  repeats: 'timed runs', seed: 'seed',
};
const MAX_WEIGHT_VALUES = 16 * 1024 * 1024; // 64 MB of float32 attention weights
export const MAX_PAINTED_LENGTH = 128; // larger grids are too small to paint by hand
const MAX_INPUT_VALUES = 16 * 1024 * 1024; // per input tensor: keeps the page's memory modest

function checkInteger(name, value) {
  const [lo, hi] = LIMITS[name];
  if (!Number.isInteger(value) || value < lo || value > hi) {
    throw new Error(`${LABELS[name]} must be a whole number from ${lo} to ${hi}; got "${value}"`);
  }
}

export function parseAdditiveValue(text) {
  const t = text.trim().toLowerCase();
  if (['-inf', '-infinity', '−inf'].includes(t)) return -Infinity;
  const v = Number(t);
  if (t === '' || Number.isNaN(v)) throw new Error(`additive mask value must be a number or -inf; got "${text}"`);
  return v;
}

// The shapes the results come in, read back from the inputs as the engine will see them.
function viewOf(config, inputs, options) {
  const { query, key } = inputs;
  const batched = query.shape.length === 3;
  const first = config.batchFirst && batched;
  // PyTorch appends bias_k's column first, then add_zero_attn's.
  const extraKeys = [config.addBiasKV && 'bias_k', config.addZeroAttn && 'zero attn'].filter(Boolean);
  return {
    batched,
    batchFirst: first,
    batch: batched ? query.shape[first ? 0 : 1] : 1,
    heads: config.numHeads,
    queryLength: query.shape[first ? 1 : 0],
    keyLength: key.shape[first ? 1 : 0] + extraKeys.length,
    extraKeys,
    embedDim: config.embedDim,
    needWeights: options.needWeights,
    averaged: options.averageAttnWeights,
  };
}

// Multiply-adds of the projections and of the two attention products, times 2 (softmax not counted).
export function forwardFlops(config, view) {
  const { batch: n, queryLength: l, keyLength: s, heads: h, embedDim: e } = view;
  const qkDim = config.qkHeadDim ?? e / h;
  const vDim = config.vHeadDim ?? e / h;
  const kdim = config.kdim ?? e;
  const vdim = config.vdim ?? e;
  const projections = l * e * h * qkDim + s * (kdim * h * qkDim + vdim * h * vDim) + l * h * vDim * e;
  const attention = h * l * s * (qkDim + vDim);
  return 2 * n * (projections + attention);
}

function causalBlocks(row, col) {
  return col > row;
}

function buildMasks(settings, painted) {
  const { batch, queryLength: l, keyLength: s } = settings;
  const options = { isCausal: false };
  if (settings.keyPadding) {
    const mask = new Uint8Array(batch * s);
    settings.validLengths.forEach((valid, n) => {
      if (!Number.isInteger(valid) || valid < 0 || valid > s) {
        throw new Error(`valid length of batch item ${n} must be from 0 to S = ${s}; got "${valid}"`);
      }
      mask.fill(1, n * s + valid, (n + 1) * s);
    });
    options.keyPaddingMask = { data: mask, shape: [batch, s] };
  }
  if (!settings.customMask) {
    options.isCausal = settings.causal;
    return options;
  }
  if (Math.max(l, s) > MAX_PAINTED_LENGTH) {
    throw new Error(`a painted attn_mask is limited to ${MAX_PAINTED_LENGTH} x ${MAX_PAINTED_LENGTH}; shorten L and S or turn the custom mask off`);
  }
  // A painted mask and the causal one are merged into one attn_mask; the engine gets one mask.
  const blocked = (r, c) => painted[r * s + c] === 1 || (settings.causal && causalBlocks(r, c));
  if (settings.maskType === 'bool') {
    const data = new Uint8Array(l * s);
    for (let i = 0; i < data.length; i++) data[i] = blocked(Math.floor(i / s), i % s) ? 1 : 0;
    options.attnMask = { data, shape: [l, s] };
  } else {
    const value = parseAdditiveValue(settings.additiveValue);
    const data = new Float32Array(l * s);
    for (let i = 0; i < data.length; i++) {
      const [r, c] = [Math.floor(i / s), i % s];
      if (painted[i]) data[i] = value;
      if (settings.causal && causalBlocks(r, c)) data[i] = -Infinity;
    }
    options.attnMask = { data, shape: [l, s] };
  }
  return options;
}

function generatedProblem(settings, file, painted) {
  for (const name of ['embedDim', 'numHeads', 'queryLength', 'keyLength', 'batch', 'seed']) checkInteger(name, settings[name]);
  const { embedDim: e, numHeads: h, queryLength: l, keyLength: s, batch: n, seed } = settings;
  // A file's module may set its own head dims; the engine checks those.
  if (settings.source !== 'file' && e % h !== 0) throw new Error(`heads (${h}) must divide embed dim (${e})`);
  if (n * Math.max(l, s) * e > MAX_INPUT_VALUES) {
    throw new Error(`inputs of ${Math.max(l, s)} x ${n} x ${e} are too large for the demo (at most ${MAX_INPUT_VALUES} values each); use fewer tokens, a smaller batch or embed dim`);
  }
  let config = { embedDim: e, numHeads: h };
  let params;
  let inputs;
  let headNames = Array.from({ length: h }, (_, i) => `head ${i}`);
  if (settings.source === 'preset') {
    const preset = buildPreset(settings);
    params = { kind: 'stateDict', tensors: preset.stateDict };
    inputs = preset.inputs;
    headNames = presetHeadNames(h).map((name, i) => `head ${i} · ${name}`);
  } else {
    const inputRng = createRng(seed + 1);
    if (settings.source === 'file') {
      config = { ...file.config, batchFirst: false }; // the page makes sequence-first inputs
      params = { kind: 'safetensors', bytes: file.bytes, load: file.load };
    } else {
      params = { kind: 'stateDict', tensors: randomStateDict(e, createRng(seed)) };
    }
    const query = normalTensor([l, n, config.embedDim], inputRng);
    const key = settings.selfAttention && !config.kdim ? query : normalTensor([s, n, config.kdim ?? config.embedDim], inputRng);
    const value = settings.selfAttention && !config.vdim ? query : normalTensor([s, n, config.vdim ?? config.embedDim], inputRng);
    inputs = { query, key, value };
  }
  const score = scoreOptions(settings.score, config.numHeads, settings.source === 'file');
  config = { ...config, ...score.config };
  if (score.sinkLogits) params.tensors = { ...params.tensors, sinks: { data: score.sinkLogits, shape: [config.numHeads] } };
  const options = { ...buildMasks(settings, painted), needWeights: settings.needWeights, averageAttnWeights: settings.averaged };
  return { config, params, inputs, options, headNames };
}

function fixtureProblem(file) {
  const { config, fixture } = file;
  const headNames = Array.from({ length: config.numHeads }, (_, i) => `head ${i}`);
  const params = { kind: 'safetensors', bytes: file.bytes, load: file.load };
  return { config, params, inputs: fixture.inputs, options: fixture.options, headNames, expected: fixture.expected };
}

// settings: the controls' values; file: describeWeightsFile's result or null; painted: the
// painter's L x S cells. Returns { request, view, headNames, flops, expected }.
export function buildProblem(settings, file, painted) {
  checkInteger('repeats', settings.repeats);
  const useFixture = settings.source === 'file' && file.fixture && settings.useFileInputs;
  const problem = useFixture ? fixtureProblem(file) : generatedProblem(settings, file, painted);
  const view = viewOf(problem.config, problem.inputs, problem.options);
  if (view.needWeights && view.batch * view.heads * view.queryLength * view.keyLength > MAX_WEIGHT_VALUES) {
    throw new Error(`attention weights of ${view.batch} x ${view.heads} x ${view.queryLength} x ${view.keyLength} are too many to draw; turn "need weights" off or use shorter sequences`);
  }
  const sinks = problem.params.tensors?.sinks;
  const modelKey = JSON.stringify([settings.source, settings.seed, problem.config, settings.source === 'preset' && [view.queryLength, view.keyLength],
    file?.id, file?.prefix, sinks && Array.from(sinks.data)]);
  return {
    request: { modelKey, config: problem.config, params: problem.params, inputs: problem.inputs, options: problem.options, repeats: settings.repeats },
    view,
    headNames: problem.headNames,
    flops: forwardFlops(problem.config, view),
    expected: problem.expected ?? null,
  };
}

// The demo's engine runs here, off the main thread: the threaded build blocks with Atomics.wait,
// which a page's main thread may not do, and a long forward must not freeze the page.
//
// Protocol (every reply carries the request's id):
//   { type: 'init', threads }                          -> { type: 'ready', info, isolated }
//   { type: 'run', modelKey, config, params, inputs, options, repeats }
//                                                      -> { type: 'result', output, weights, timesMs }
//   any failure                                        -> { type: 'error', message }
// params is { kind: 'stateDict', tensors } or { kind: 'safetensors', bytes, prefix }. The module is
// kept between runs while modelKey stays the same, so only forwards are timed.
import { loadMHA } from '../src/index.js';

let lib = null;
let model = null; // { key, mha }

function prepareModel(modelKey, config, params) {
  if (model?.key === modelKey) return model.mha;
  model?.mha.dispose();
  model = null;
  const mha = lib.createMultiheadAttention(config);
  try {
    if (params.kind === 'safetensors') {
      mha.loadSafetensors(params.bytes, { prefix: params.prefix });
    } else {
      mha.loadStateDict(params.tensors);
    }
  } catch (error) {
    mha.dispose();
    throw error;
  }
  model = { key: modelKey, mha };
  return mha;
}

// One untimed warm-up forward, then `repeats` timed ones; the last result is returned.
async function run({ modelKey, config, params, inputs, options, repeats }) {
  const mha = prepareModel(modelKey, config, params);
  const { query, key, value } = inputs;
  let result = await mha.forward(query, key, value, options);
  const timesMs = [];
  for (let i = 0; i < repeats; i++) {
    const start = performance.now();
    result = await mha.forward(query, key, value, options);
    timesMs.push(performance.now() - start);
  }
  return { output: result.output, weights: result.weights ?? null, timesMs };
}

function transferablesOf(result) {
  return [result.output?.data?.buffer, result.weights?.data?.buffer].filter(Boolean);
}

async function handle(message) {
  if (message.type === 'init') {
    lib = await loadMHA({ threads: message.threads });
    return { type: 'ready', info: lib.info, isolated: self.crossOriginIsolated === true };
  }
  if (message.type === 'run') {
    if (!lib) throw new Error('the engine is not loaded yet');
    return { type: 'result', ...(await run(message)) };
  }
  throw new Error(`unknown request type "${message.type}"`);
}

self.onmessage = async ({ data: message }) => {
  try {
    const reply = await handle(message);
    self.postMessage({ id: message.id, ...reply }, reply.type === 'result' ? transferablesOf(reply) : []);
  } catch (error) {
    // A bad setting must never take the worker down: report it and wait for the next request.
    if (message.type === 'run') {
      model?.mha.dispose();
      model = null;
    }
    self.postMessage({ id: message.id, type: 'error', message: error?.message ?? String(error) });
  }
};

// A D row's step (one decoding step against a KV cache) on inputs and model
// bytes already in memory, as forward.mjs is for the W rows: no Node code, so
// the Node engines (mha_wasm.mjs, onnxruntime.mjs) and the browser page
// (bench/browser/page.js) make the same calls.
import { cacheBytes, headDim, noCacheNotCompared, weightBytes } from '../lib/decode.mjs';
import { moduleOptions } from './forward.mjs';

// mha-wasm: the module options of a D row (createMhaModule's config).
export function decodeConfig(w) {
  return {
    bias: w.bias,
    ...(w.kvHeads !== w.H ? { numKVHeads: w.kvHeads } : {}),
    ...(w.rotary ? { rotary: { dim: w.rotary.dim, base: w.rotary.base, interleaved: false } } : {}),
    ...moduleOptions(w),
    ...(w.weights ? { weightsDtype: w.weights } : {}),
  };
}

// The step's query rows and the rows the cache is filled from (batch 1).
function stepTensors(w, inputs) {
  const tensor = (data, rows) => ({ data, shape: [1, rows, w.E] });
  if (w.cross) return { step: tensor(inputs.rows, w.L), source: tensor(inputs.encoder, w.past) };
  return {
    step: tensor(inputs.rows.subarray(w.past * w.E), w.L),
    source: tensor(inputs.rows.subarray(0, w.past * w.E), w.past),
    all: tensor(inputs.rows, w.past + w.L),
  };
}

// The cache is filled once (prefill, or the encoder keys for cross-attention);
// before each run it is rolled back to `past` keys (beforeRun, not timed).
// Also reports what the cache took from the heap (malloc bytes in use before
// and after createKVCache) against what its maxLength says.
export async function prepareDecode(lib, mha, w, inputs) {
  const { step, source } = stepTensors(w, inputs);
  const maxLength = w.past + (w.cross ? 0 : w.L);
  const before = (await lib.heapInfo()).inUseBytes;
  const cache = mha.createKVCache({ batchSize: 1, maxLength, dtype: w.dtype });
  const memory = { cacheBytes: (await lib.heapInfo()).inUseBytes - before, expectedBytes: cacheBytes(w, maxLength),
    moduleBytes: mha.memory, expectedModuleBytes: weightBytes(w) };
  if (w.past > 0) await mha.forward(source, source, source, { cache, isCausal: w.causal, needWeights: false });
  const options = { cache, isCausal: w.causal, needWeights: false };
  const [key, value] = w.cross ? [null, null] : [step, step];
  const run = async () => (await mha.forward(step, key, value, options)).output.data;
  // A self-attention step appended its key: roll back (untimed, awaited: truncate
  // resolves once the cache is shorter) before the next.
  const beforeRun = w.cross ? undefined : () => cache.truncate(w.past);
  const stepOnce = async () => {
    await beforeRun?.();
    await run();
  };
  return {
    run,
    beforeRun,
    memory,
    // Heap after a warm-up and after `steps` more steps (nothing may grow).
    async soak(steps) {
      for (let i = 0; i < 100; i++) await stepOnce();
      const warm = await lib.heapInfo();
      for (let i = 0; i < steps; i++) await stepOnce();
      return { steps, warm, end: await lib.heapInfo() };
    },
  };
}

// Without a cache the step's queries attend to every source row, whose keys
// and values are projected again. One query needs no mask (it is the last
// position); a prefill (past 0) is the causal forward itself.
export async function prepareNoCache(mha, w, inputs) {
  if (w.L > 1 && w.past > 0) throw new Error('no-cache baseline: several queries after a past need a mask');
  const { step, source, all } = stepTensors(w, inputs);
  const keys = w.cross ? source : all;
  const options = { isCausal: w.causal && w.L > 1, needWeights: false };
  return {
    notCompared: noCacheNotCompared(w),
    async run() {
      return (await mha.forward(step, keys, keys, options)).output.data;
    },
  };
}

// One decoding step: the new rows and the cache before the step as
// past_key/past_value (MultiHeadAttention returns present = past + new; a
// cross-attention step reads the projected encoder keys and appends nothing).
// GroupQueryAttention also takes seqlens_k (total length - 1) and the total.
export function decodeFeeds(ort, w, inputs) {
  const rows = w.cross ? inputs.rows : inputs.rows.subarray(w.past * w.E);
  const feed = { query: new ort.Tensor('float32', rows, [1, w.L, w.E]) };
  if (w.past > 0) {
    const heads = w.cross ? w.H : w.kvHeads;
    const shape = [1, heads, w.past, headDim(w)];
    feed.past_key = new ort.Tensor('float32', inputs.pastKey, shape);
    feed.past_value = new ort.Tensor('float32', inputs.pastValue, shape);
  }
  if (w.kvHeads !== w.H || w.rotary) {
    const total = w.past + w.L;
    feed.seqlens_k = new ort.Tensor('int32', Int32Array.of(total - 1), [1]);
    feed.total_sequence_length = new ort.Tensor('int32', Int32Array.of(total), []);
  }
  return feed;
}

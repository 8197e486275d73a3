// mha-wasm, the package under web/, through its public API (DESIGN.md):
// prepare (W rows: one forward), prepareDecode (D rows: one step against a KV
// cache) and prepareNoCache (D rows without a cache: the baseline, one forward
// whose keys are every source row of the step, projected again each time).
import fs from 'node:fs';
import path from 'node:path';
import { cacheBytes, noCacheNotCompared } from '../lib/decode.mjs';
import { ROOT_DIR, modelPath } from '../lib/workloads.mjs';
import { createMhaModule, loadMhaThreads, mhaForward } from './forward.mjs';

const ENTRY = path.join(ROOT_DIR, 'web/src/index.js');

export async function loadMhaWasm({ threads }) {
  if (!fs.existsSync(ENTRY)) throw new Error('not built (web/src/index.js is missing)');
  const { loadMHA } = await import(ENTRY);
  const lib = await loadMhaThreads(loadMHA, threads);
  const createModule = (w, config) =>
    createMhaModule(lib, w, new Uint8Array(fs.readFileSync(modelPath(w, 'safetensors'))), config);
  return {
    info: lib.info,
    prepare: async (w, inputs) => mhaForward(await createModule(w, {}), w, inputs),
    prepareDecode: async (w, inputs) => prepareDecode(lib, await createModule(w, decodeConfig(w)), w, inputs),
    prepareNoCache: async (w, inputs) => prepareNoCache(await createModule(w, decodeConfig(w)), w, inputs),
  };
}

function decodeConfig(w) {
  return {
    bias: w.bias,
    ...(w.kvHeads !== w.H ? { numKVHeads: w.kvHeads } : {}),
    ...(w.rotary ? { rotary: { dim: w.rotary.dim, base: w.rotary.base, interleaved: false } } : {}),
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
async function prepareDecode(lib, mha, w, inputs) {
  const { step, source } = stepTensors(w, inputs);
  const maxLength = w.past + (w.cross ? 0 : w.L);
  const before = (await lib.heapInfo()).inUseBytes;
  const cache = mha.createKVCache({ batchSize: 1, maxLength, dtype: w.dtype });
  const memory = { cacheBytes: (await lib.heapInfo()).inUseBytes - before, expectedBytes: cacheBytes(w, maxLength) };
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
async function prepareNoCache(mha, w, inputs) {
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

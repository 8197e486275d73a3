// mha-wasm, the package under web/, through its public API (docs/design.md):
// prepare (W rows: one forward), prepareDecode (D rows: one step against a KV
// cache) and prepareNoCache (D rows without a cache: the baseline, one forward
// whose keys are every source row of the step, projected again each time).
import fs from 'node:fs';
import path from 'node:path';
import { ROOT_DIR, modelPath, sinksPath } from '../lib/workloads.mjs';
import { decodeConfig, prepareDecode, prepareNoCache } from './decode_step.mjs';
import { createMhaModule, loadMhaThreads, mhaForward, moduleOptions } from './forward.mjs';

const ENTRY = path.join(ROOT_DIR, 'web/src/index.js');

export async function loadMhaWasm({ threads }) {
  if (!fs.existsSync(ENTRY)) throw new Error('not built (web/src/index.js is missing)');
  const { loadMHA } = await import(ENTRY);
  const lib = await loadMhaThreads(loadMHA, threads);
  // A row with sinks loads them from a second shard.
  const createModule = (w, config) => createMhaModule(lib, w,
    [modelPath(w, 'safetensors'), sinksPath(w)].filter(Boolean).map((file) => new Uint8Array(fs.readFileSync(file))),
    config);
  return {
    info: lib.info,
    prepare: async (w, inputs) => mhaForward(await createModule(w, moduleOptions(w)), w, inputs),
    prepareDecode: async (w, inputs) => prepareDecode(lib, await createModule(w, decodeConfig(w)), w, inputs),
    prepareNoCache: async (w, inputs) => prepareNoCache(await createModule(w, decodeConfig(w)), w, inputs),
  };
}

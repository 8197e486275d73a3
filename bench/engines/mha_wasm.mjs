// mha-wasm, the package under web/, through its public API (DESIGN.md).
import fs from 'node:fs';
import path from 'node:path';
import { ROOT_DIR, modelPath } from '../lib/workloads.mjs';

const ENTRY = path.join(ROOT_DIR, 'web/src/index.js');

export async function loadMhaWasm({ threads }) {
  if (!fs.existsSync(ENTRY)) throw new Error('not built (web/src/index.js is missing)');
  const { loadMHA } = await import(ENTRY);
  const lib = await loadMHA({ threads });
  if (lib.info.threads !== threads) {
    throw new Error(`asked for ${threads} threads, got ${JSON.stringify(lib.info)}`);
  }
  return {
    info: lib.info,
    async prepare(w, inputs) {
      const mha = lib.createMultiheadAttention({ embedDim: w.E, numHeads: w.H, batchFirst: true });
      mha.loadSafetensors(new Uint8Array(fs.readFileSync(modelPath(w, 'safetensors'))));
      const query = { data: inputs.query, shape: [w.B, w.L, w.E] };
      const key = w.cross ? { data: inputs.key, shape: [w.B, w.S, w.E] } : query;
      const value = w.cross ? { data: inputs.value, shape: [w.B, w.S, w.E] } : query;
      const options = {
        isCausal: w.causal,
        needWeights: w.needWeights,
        averageAttnWeights: true,
        keyPaddingMask: inputs.keyPaddingMask
          ? { data: inputs.keyPaddingMask, shape: [w.B, w.S] }
          : undefined,
      };
      return {
        async run() {
          const { output } = await mha.forward(query, key, value, options);
          return output.data;
        },
      };
    },
  };
}

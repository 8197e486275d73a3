// onnxruntime-web (WASM backend) and onnxruntime-node running the models that
// bench/export_onnx.py exported from nn.MultiheadAttention (W rows) and that
// bench/export_decode.py built around the com.microsoft attention ops (D rows).
import fs from 'node:fs';
import path from 'node:path';
import { isDecode } from '../lib/decode.mjs';
import { ROOT_DIR, modelPath } from '../lib/workloads.mjs';
import { decodeFeeds } from './decode_step.mjs';
import { ortFeed, ortSession, ortWebOptions } from './forward.mjs';

const ORT_WEB_DIST = path.join(ROOT_DIR, 'node_modules/onnxruntime-web/dist/');

function engine(ort, sessionOptions) {
  return {
    async prepare(w, inputs) {
      // Bytes, not a path: Node's global fetch cannot read files.
      const model = new Uint8Array(fs.readFileSync(modelPath(w, 'onnx')));
      const feed = isDecode(w) ? decodeFeeds(ort, w, inputs) : ortFeed(ort, w, inputs);
      return ortSession(ort, model, sessionOptions, feed);
    },
  };
}

export async function loadOrtWeb({ threads }) {
  const ort = await import(path.join(ORT_WEB_DIST, 'ort.wasm.min.mjs'));
  return engine(ort, ortWebOptions(ort, threads, ORT_WEB_DIST));
}

export async function loadOrtNode({ threads }) {
  const ort = (await import('onnxruntime-node')).default;
  return engine(ort, {
    executionProviders: ['cpu'],
    graphOptimizationLevel: 'all',
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
  });
}

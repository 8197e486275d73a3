// onnxruntime-web (WASM backend) and onnxruntime-node running the models that
// bench/export_onnx.py exported from nn.MultiheadAttention (W rows) and that
// bench/export_decode.py built around the com.microsoft attention ops (D rows).
import fs from 'node:fs';
import path from 'node:path';
import { headDim, isDecode } from '../lib/decode.mjs';
import { ROOT_DIR, modelPath } from '../lib/workloads.mjs';
import { ortFeed, ortSession, ortWebOptions } from './forward.mjs';

const ORT_WEB_DIST = path.join(ROOT_DIR, 'node_modules/onnxruntime-web/dist/');

// One decoding step: the new rows and the cache before the step as
// past_key/past_value (MultiHeadAttention returns present = past + new; a
// cross-attention step reads the projected encoder keys and appends nothing).
// GroupQueryAttention also takes seqlens_k (total length - 1) and the total.
function decodeFeeds(ort, w, inputs) {
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

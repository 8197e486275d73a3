// onnxruntime-web (WASM backend) and onnxruntime-node running the model that
// bench/export_onnx.py exported from nn.MultiheadAttention.
import fs from 'node:fs';
import path from 'node:path';
import { ROOT_DIR, modelPath } from '../lib/workloads.mjs';

const ORT_WEB_DIST = path.join(ROOT_DIR, 'node_modules/onnxruntime-web/dist/');

function feeds(ort, w, inputs) {
  const feed = { query: new ort.Tensor('float32', inputs.query, [w.B, w.L, w.E]) };
  if (w.cross) {
    feed.key = new ort.Tensor('float32', inputs.key, [w.B, w.S, w.E]);
    feed.value = new ort.Tensor('float32', inputs.value, [w.B, w.S, w.E]);
  }
  if (inputs.keyPaddingMask) {
    feed.key_padding_mask = new ort.Tensor('bool', inputs.keyPaddingMask, [w.B, w.S]);
  }
  return feed;
}

function engine(ort, sessionOptions) {
  return {
    async prepare(w, inputs) {
      // Bytes, not a path: Node's global fetch cannot read files.
      const model = new Uint8Array(fs.readFileSync(modelPath(w, 'onnx')));
      const session = await ort.InferenceSession.create(model, sessionOptions);
      const feed = feeds(ort, w, inputs);
      return {
        async run() {
          const result = await session.run(feed);
          return result.output.data;
        },
      };
    },
  };
}

export async function loadOrtWeb({ threads }) {
  const ort = await import(path.join(ORT_WEB_DIST, 'ort.wasm.min.mjs'));
  ort.env.wasm.numThreads = threads;
  ort.env.wasm.wasmPaths = ORT_WEB_DIST;
  return engine(ort, { executionProviders: ['wasm'], graphOptimizationLevel: 'all' });
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

// @tensorflow/tfjs-backend-wasm: nn.MultiheadAttention composed from 2-D
// matMul per head (its fastest form): one packed QKV projection, then per
// head scores = q k^T (scale folded into the query weights), + additive
// mask, softmax, p v; heads concatenated; output projection. Every matMul is
// untransposed: its transposeB path is ~10x slower, so the weights are
// transposed once and K once per batch.
// tfjs-backend-wasm disables threads in Node (WASM_HAS_MULTITHREAD_SUPPORT
// is false there), so it runs on one thread only.
import path from 'node:path';
import { ROOT_DIR, modelPath, readSafetensors } from '../lib/workloads.mjs';

export async function loadTfjsWasm({ threads }) {
  if (threads !== 1) throw new Error('tfjs-backend-wasm has no threads in Node');
  const tf = await import('@tensorflow/tfjs-core');
  const { setWasmPaths } = await import('@tensorflow/tfjs-backend-wasm');
  setWasmPaths(path.join(ROOT_DIR, 'node_modules/@tensorflow/tfjs-backend-wasm/dist/'));
  await tf.setBackend('wasm');
  await tf.ready();
  return { prepare: (w, inputs) => prepare(tf, w, inputs) };
}

// Additive masks per batch: (L, S), (1, S) or null.
function additiveMasks(tf, w, inputs) {
  const causal = w.causal
    ? tf.tidy(() => tf.mul(tf.sub(tf.linalg.bandPart(tf.ones([w.L, w.S]), -1, 0), 1), 1e30))
    : null;
  const masks = [];
  for (let b = 0; b < w.B; b++) {
    let mask = causal;
    if (inputs.keyPaddingMask) {
      const row = inputs.keyPaddingMask.subarray(b * w.S, (b + 1) * w.S);
      const padding = tf.tensor2d(Float32Array.from(row, (m) => (m ? -Infinity : 0)), [1, w.S]);
      mask = mask ? tf.add(mask, padding) : padding;
    }
    masks.push(mask);
  }
  return masks;
}

function prepare(tf, w, inputs) {
  const p = readSafetensors(modelPath(w, 'safetensors'));
  const E = w.E;
  const D = E / w.H;
  // Fold the 1/sqrt(D) score scale into the query rows of the projection.
  const inWeight = p.in_proj_weight.data.slice();
  const inBias = p.in_proj_bias.data.slice();
  const scale = 1 / Math.sqrt(D);
  for (let i = 0; i < E * E; i++) inWeight[i] *= scale;
  for (let i = 0; i < E; i++) inBias[i] *= scale;
  const wIn = tf.tidy(() => tf.transpose(tf.tensor2d(inWeight, [3 * E, E])));  // (E, 3E)
  const bIn = tf.tensor1d(inBias);
  const wOut = tf.tidy(() => tf.transpose(tf.tensor2d(p['out_proj.weight'].data, [E, E])));
  const bOut = tf.tensor1d(p['out_proj.bias'].data);
  const query = tf.tensor2d(inputs.query, [w.B * w.L, E]);
  const key = w.cross ? tf.tensor2d(inputs.key, [w.B * w.S, E]) : null;
  const value = w.cross ? tf.tensor2d(inputs.value, [w.B * w.S, E]) : null;
  const masks = additiveMasks(tf, w, inputs);

  // Cross-attention projects query, key and value apart: slice the weights once.
  const part = (i) => [tf.slice(wIn, [0, i * E], [E, E]), tf.slice(bIn, [i * E], [E])];
  const parts = w.cross ? [0, 1, 2].map(part) : null;
  const project = (x, [weight, bias]) => tf.add(tf.matMul(x, weight), bias);

  const forwardBatch = (b) => {
    let q, k, v;
    if (w.cross) {
      q = project(tf.slice(query, [b * w.L, 0], [w.L, E]), parts[0]);
      k = project(tf.slice(key, [b * w.S, 0], [w.S, E]), parts[1]);
      v = project(tf.slice(value, [b * w.S, 0], [w.S, E]), parts[2]);
    } else {
      const qkv = tf.add(tf.matMul(tf.slice(query, [b * w.L, 0], [w.L, E]), wIn), bIn);
      [q, k, v] = tf.split(qkv, 3, 1);
    }
    const kT = tf.transpose(k);  // (E, S)
    const heads = [];
    let weightSum = null;
    for (let h = 0; h < w.H; h++) {
      // A tidy per head frees its (L, S) intermediates before the next one.
      const [head, probs] = tf.tidy(() => {
        let scores = tf.matMul(tf.slice(q, [0, h * D], [w.L, D]), tf.slice(kT, [h * D, 0], [D, w.S]));
        if (masks[b]) scores = tf.add(scores, masks[b]);
        const probs = tf.softmax(scores);
        const head = tf.matMul(probs, tf.slice(v, [0, h * D], [w.S, D]));
        return w.needWeights ? [head, probs] : [head];
      });
      heads.push(head);
      if (probs) weightSum = weightSum ? tf.add(weightSum, probs) : probs;
    }
    const output = tf.add(tf.matMul(tf.concat(heads, 1), wOut), bOut);
    return [output, weightSum ? tf.div(weightSum, w.H) : null];
  };

  return {
    async run() {
      const [output, weights] = tf.tidy(() => {
        const results = [];
        for (let b = 0; b < w.B; b++) results.push(forwardBatch(b));
        const out = tf.concat(results.map((r) => r[0]), 0);
        return [out, w.needWeights ? tf.concat(results.map((r) => r[1]), 0) : tf.scalar(0)];
      });
      const data = await output.data();
      if (w.needWeights) await weights.data();
      output.dispose();
      weights.dispose();
      return data;
    },
  };
}

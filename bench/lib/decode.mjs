// The decoding workloads (workloads.json "decode", ids D*): one step of a
// decoder against a KV cache. bench/export_decode.py writes their parameters,
// ONNX models, inputs and float64 reference outputs.
//   past: keys the cache holds before the step (cross-attention: the encoder
//         keys, appended once); L: the step's new tokens (queries).
// No Node code: the browser page (bench/browser) imports it too.

export const isDecode = (w) => w.past !== undefined;

export const headDim = (w) => w.E / w.H;

const cacheElementBytes = (w) => (w.dtype === 'float32' ? 4 : 2);

// Bytes of the keys and values a cache of `length` positions holds.
export function cacheBytes(w, length) {
  return 2 * w.kvHeads * headDim(w) * length * cacheElementBytes(w);
}

// Bytes of a weight as the module keeps it (w.weights: its weightsDtype; the
// model file is float32).
const WEIGHT_BYTES = { float32: 4, float16: 2, bfloat16: 2, int8: 1 };

// The parameters in the module's precision: the query and output projections
// (E x E each), the key and value projections (kvHeads * D x E each, not read
// by a cross-attention step: the encoder keys are projected once), and the
// float32 biases (and int8's float32 scales, one per output channel).
export function weightBytes(w) {
  const kv = w.kvHeads * headDim(w);
  const outputs = 2 * w.E + (w.cross ? 0 : 2 * kv);
  const matrices = outputs * w.E;
  const perOutput = (w.bias ? 4 : 0) + (w.weights === 'int8' ? 4 : 0);
  return WEIGHT_BYTES[w.weights ?? 'float32'] * matrices + perOutput * outputs;
}

// What one step must read from memory at least: every weight once and every
// key and value the step attends to once (a window's at most).
export function stepBytes(w) {
  return weightBytes(w) + cacheBytes(w, Math.min(w.past + (w.cross ? 0 : w.L), w.window ?? Infinity));
}

// { rows, encoder, pastKey, pastValue } as Float32Arrays, from the files
// export_decode.py wrote (read(name): the bytes of build/bench/data/<id>.<name>,
// a Uint8Array or a Promise of one; the Node children read the files, the
// browser page fetches them).
// Self-attention: rows are the past + L tokens (the cache is filled from the
// first `past`, the step is the last L); cross-attention: rows are the step's
// query and encoder the states the cache is filled from once.
// pastKey/pastValue: the cache before the step, (1, heads, past, D), for
// onnxruntime's past_key/past_value.
export async function decodeInputsFrom(w, read) {
  const floats = async (name) => new Float32Array(new Uint8Array(await read(name)).buffer);
  return {
    rows: await floats('query.f32'),
    encoder: w.cross ? await floats('key.f32') : null,
    pastKey: await floats('past_key.f32'),
    pastValue: await floats('past_value.f32'),
  };
}

export const REFERENCE_NAME = 'reference.out.f32';

// Why a no-cache baseline's output is not compared with the reference, if it
// is not: without a cache rotary positions start at 0, so a step after a past
// rotates its query as position 0 (timed all the same).
export const noCacheNotCompared = (w) =>
  (w.rotary && w.past > 0 ? 'rotary positions start at 0 without a cache' : undefined);

// Elementwise tolerance against the float64 reference: docs/design.md's (1e-4 abs
// or 1e-3 rel) for float32 caches and weights; float16 keys and values carry
// 11 bits, bfloat16 ones 8 (a spacing 2^3 times wider); bfloat16 weights 8
// bits (rounded at load from the float32 model); int8 weights
// docs/precision.md's bound.
const TOLERANCES = { float32: { abs: 1e-4, rel: 1e-3 }, float16: { abs: 1e-3, rel: 1e-2 },
  bfloat16: { abs: 8e-3, rel: 8e-2 } };
export function tolerance(w) {
  if (w.weights === 'int8') return { abs: 4e-2, rel: 2e-2 };
  if (w.weights === 'bfloat16') return { abs: 1e-2, rel: 1e-2 };
  return TOLERANCES[w.dtype];
}

// The workloads of bench/workloads.json, their inputs, FLOPs and parameters.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRng } from '../../web/demo/random.js';
import { inputsFrom } from './inputs.mjs';
import { REFERENCE_NAME, decodeInputsFrom, isDecode } from './decode.mjs';

export const BENCH_DIR = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
export const ROOT_DIR = path.dirname(BENCH_DIR);
export const MODELS_DIR = path.join(BENCH_DIR, 'models');
export const config = JSON.parse(fs.readFileSync(path.join(BENCH_DIR, 'workloads.json'), 'utf8'));
// Issue 22's rows ("models"): the W or D row each is "like", with its own
// fields (the options window, softcap, alibi, sinks; "model": whose
// parameters it loads, which makes it ours only; "base": the row without the
// option, for the option-cost ratios).
config.models = config.models.map(({ like, ...row }) => ({
  ...[...config.workloads, ...config.decode].find((w) => w.id === like), ...row, modelRow: true,
}));
export const isModelRow = (w) => w.modelRow === true;

// The timing rule of a row: "timing" or "decodeTiming", with the row's own
// "timing" fields over it (V1f: onnxruntime-web takes minutes a forward).
export const timingOf = (w) => ({ ...(isDecode(w) ? config.decodeTiming : config.timing), ...w.timing });

// Every workload by id (the decoding ones too), plus the GEMM probe and the
// longest-sequence search (the W6 model at L = S = n, id "L<n>").
export function findWorkload(id) {
  const all = [...config.workloads, ...config.decode, ...config.models, config.gemm];
  const found = all.find((w) => w.id === id);
  if (found) return found;
  const match = /^L(\d+)$/.exec(id);
  if (!match) throw new Error(`unknown workload "${id}"`);
  const n = Number(match[1]);
  const base = all.find((w) => w.id === config.longest.model);
  return { ...base, id, L: n, S: n, model: base.id };
}

export function modelPath(workload, ext) {
  return path.join(MODELS_DIR, `${workload.model ?? workload.id}.${ext}`);
}

// Dense FLOPs of one forward, masked work included (issue 5).
export function flops({ B, L, S, E }) {
  return 2 * B * (2 * L * E * E + 2 * S * E * E) + 4 * B * L * S * E;
}

function randomFloats(count, seed) {
  const next = createRng(seed);  // the same inputs in every engine of one run
  const data = new Float32Array(count);
  for (let i = 0; i < count; i++) data[i] = 2 * next() - 1;
  return data;
}

// { query, key, value: Float32Array (B, L|S, E), keyPaddingMask: Uint8Array (B, S) | null }.
// key and value are the query itself for self-attention.
export function makeInputs(w) {
  const query = randomFloats(w.B * w.L * w.E, 1);
  const key = w.cross ? randomFloats(w.B * w.S * w.E, 2) : query;
  const value = w.cross ? randomFloats(w.B * w.S * w.E, 3) : query;
  let keyPaddingMask = null;
  if (w.kpmLengths) {
    keyPaddingMask = new Uint8Array(w.B * w.S);
    for (let b = 0; b < w.B; b++) {
      for (let s = w.kpmLengths[b]; s < w.S; s++) keyPaddingMask[b * w.S + s] = 1;
    }
  }
  return { query, key, value, keyPaddingMask };
}

// The F32 tensors of a .safetensors file: { name: { data: Float32Array, shape } }.
export function readSafetensors(file) {
  const bytes = fs.readFileSync(file);
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8'));
  const tensors = {};
  for (const [name, entry] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    if (entry.dtype !== 'F32') throw new Error(`${file}: ${name} is ${entry.dtype}, expected F32`);
    const [begin, end] = entry.data_offsets;
    const copy = bytes.subarray(8 + headerLength + begin, 8 + headerLength + end);
    tensors[name] = { data: new Float32Array(new Uint8Array(copy).buffer), shape: entry.shape };
  }
  return tensors;
}

// Inputs and outputs travel between the runners (JS, C++, Python) as raw
// little-endian files: <id>.query.f32, .key.f32, .value.f32, .kpm.u8, <id>.<runner>.out.f32.
export const BUILD_DIR = path.join(ROOT_DIR, 'build/bench');
export const DATA_DIR = path.join(BUILD_DIR, 'data');

export function dataPath(id, name) {
  return path.join(DATA_DIR, `${id}.${name}`);
}

// A .safetensors file of F32 tensors ({ name: { data: Float32Array, shape } }).
export function safetensorsBytes(tensors) {
  let offset = 0;
  const header = {};
  for (const [name, { data, shape }] of Object.entries(tensors)) {
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset += data.byteLength] };
  }
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, json, ...Object.values(tensors).map(({ data }) => Buffer.from(data.buffer))]);
}

// A row with sinks: the logits (one per head, in [-2, 2]) as a second shard
// beside its model's parameters, <id>.sinks.safetensors.
export const sinksPath = (w) => (w.sinks ? dataPath(w.id, 'sinks.safetensors') : null);

export function writeInputs(w) {
  fs.mkdirSync(DATA_DIR, { recursive: true });
  const inputs = makeInputs(w);
  const write = (name, array) => fs.writeFileSync(dataPath(w.id, name), new Uint8Array(array.buffer));
  write('query.f32', inputs.query);
  if (w.cross) {
    write('key.f32', inputs.key);
    write('value.f32', inputs.value);
  }
  if (inputs.keyPaddingMask) write('kpm.u8', inputs.keyPaddingMask);
  if (w.sinks) {
    fs.writeFileSync(sinksPath(w), safetensorsBytes({ sinks: { data: randomFloats(w.H, 4).map((x) => 2 * x), shape: [w.H] } }));
  }
}

export function readFloats(file) {
  return new Float32Array(new Uint8Array(fs.readFileSync(file)).buffer);
}

// What writeInputs wrote (a Promise).
export const readInputs = (w) => inputsFrom(w, (name) => fs.readFileSync(dataPath(w.id, name)));

// What bench/export_decode.py wrote for a D row (a Promise), and where its reference output is.
export const readDecodeInputs = (w) => decodeInputsFrom(w, (name) => fs.readFileSync(dataPath(w.id, name)));
export const referencePath = (w) => dataPath(w.id, REFERENCE_NAME);

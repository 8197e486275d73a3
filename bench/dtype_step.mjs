#!/usr/bin/env node
// Issue 24's speed targets on D2's step (E = 2048, 32 heads, 8 KV heads, rotary 64, one token
// against 4095 cached keys), WebAssembly in Node: each precision (weights bfloat16 or int8, a
// float16 or bfloat16 cache, and the two 16-bit pairs of both) against float32 weights and
// cache on the same inputs, timed in alternation (measurePair: the median of the pairs'
// ratios), one module and cache each, every step after rolling its cache back (untimed).
// With --breakdown, where float32's step goes instead: the step against 4095 keys, the same
// module's step against an empty cache (the projections and the rest) and a tiny module's step
// (the call's own cost: binding, threads), the first two in alternation.
// Each line states the bytes the step must read over its time; `--gbps=X` (the read bandwidth
// of bench/peak/read_bandwidth.mjs at the same thread count) adds their share of it.
// `--past=N`: a cache of N keys instead (0: the projections alone, near enough).
// Usage: node bench/dtype_step.mjs [threads] [--breakdown] [--gbps=X] [--past=N] [variant ...]
//   (after npm run build; variants: the names below, default all)
import { cpus, loadavg } from 'node:os';
import { loadMHA } from '../web/src/index.js';
import { config } from './lib/workloads.mjs';
import { measure, measurePair } from './lib/timing.mjs';
import { stepBytes } from './lib/decode.mjs';

const D2 = { E: 2048, H: 32, kvHeads: 8, past: 4095, L: 1, bias: false, cross: false };
const pastFlag = process.argv.find((a) => a.startsWith('--past='));
if (pastFlag) D2.past = Number(pastFlag.split('=')[1]);
const VARIANTS = {
  'weights-bfloat16': { weights: 'bfloat16', dtype: 'float32' },
  'weights-int8': { weights: 'int8', dtype: 'float32' },
  'cache-float16': { weights: 'float32', dtype: 'float16' },
  'cache-bfloat16': { weights: 'float32', dtype: 'bfloat16' },
  'both-bfloat16': { weights: 'bfloat16', dtype: 'bfloat16' },
  'int8-cache-bfloat16': { weights: 'int8', dtype: 'bfloat16' },
};

const args = process.argv.slice(2);
const flag = (name) => args.find((a) => a.startsWith(`--${name}`));
const positional = args.filter((a) => !a.startsWith('--'));
const threads = Number(positional[0] ?? cpus().length);
const names = positional.length > 1 ? positional.slice(1) : Object.keys(VARIANTS);
const gbps = flag('gbps') ? Number(flag('gbps').split('=')[1]) : undefined;
const timing = { ...config.decodeTiming, budgetMs: 4000 };

const lib = await loadMHA({ build: 'simd-threaded', threads });
// One random state dict (a fixed-seed generator) shared by every module.
let seed = 1;
const random = (n) => Float32Array.from({ length: n }, () => {
  seed = (seed * 1103515245 + 12345) % 2 ** 31;
  return seed / 2 ** 31 - 0.5;
});
const moduleConfig = (w) => ({ embedDim: w.E, numHeads: w.H, numKVHeads: w.kvHeads, bias: w.bias,
  batchFirst: true, rotary: { dim: Math.min(64, w.E / w.H), base: 10000 }, weightsDtype: w.weights ?? 'float32' });
const shapes = lib.createMultiheadAttention(moduleConfig(D2)).parameters;
// Weights scaled by 1 / sqrt(inputs), so that outputs are of order 1 (their differences mean
// something).
const stateOf = (parameters) => Object.fromEntries(parameters.map(({ name, shape }) => {
  const data = random(shape.reduce((a, b) => a * b));
  if (shape.length === 2) data.forEach((x, i) => { data[i] = x / Math.sqrt(shape[1]); });
  return [name, { data, shape }];
}));
const stateDict = stateOf(shapes);
const rows = random((D2.past + 1) * D2.E);
const source = { data: rows.subarray(0, D2.past * D2.E), shape: [1, D2.past, D2.E] };
const token = { data: rows.subarray(D2.past * D2.E), shape: [1, 1, D2.E] };

// A step of module `w` against a cache of `past` keys (filled once), rolled back before each.
async function stepOf(w, past = w.past, state = stateDict) {
  const mha = lib.createMultiheadAttention(moduleConfig(w));
  await mha.loadStateDict(state);
  const cache = mha.createKVCache({ batchSize: 1, maxLength: past + 1, dtype: w.dtype ?? 'float32' });
  const options = { cache, isCausal: true, needWeights: false };
  if (past > 0) {
    const prefill = { data: source.data.subarray(0, past * w.E), shape: [1, past, w.E] };
    await mha.forward(prefill, prefill, prefill, options);
  }
  const x = { data: token.data.subarray(0, w.E), shape: [1, 1, w.E] };
  let out;
  const run = async () => {
    await cache.truncate(past);
    out = (await mha.forward(x, x, x, options)).output.data;
  };
  return { run, memory: mha.memory, output: () => out };
}

const maxDiff = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
const base = { ...D2, weights: 'float32', dtype: 'float32' };
const ms = (x) => `${x.toFixed(3)} ms`;
const share = (bytes, t) => `${(bytes / t / 1e6).toFixed(2)} GB/s` +
  (gbps ? ` (${((bytes / t / 1e6 / gbps) * 100).toFixed(0)} % of ${gbps} GB/s)` : '');
console.log(`D2 step against ${D2.past} cached keys, ${lib.info.build} (${lib.info.target}), ${lib.info.threads} threads; ` +
  `${cpus()[0].model}; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')} at start`);

const f32 = await stepOf(base);
if (flag('breakdown')) {
  const empty = await stepOf(base, 0);
  const tinyShape = { E: 64, H: 4, kvHeads: 4, bias: false, weights: 'float32', dtype: 'float32' };
  const tinyState = stateOf(lib.createMultiheadAttention(moduleConfig(tinyShape)).parameters);
  const tiny = await stepOf(tinyShape, 0, tinyState);
  const pair = await measurePair(empty.run, f32.run, timing);
  const call = (await measure(tiny.run, timing)).medianMs;
  const attention = pair.medianMs - pair.baseMedianMs;
  const weights = stepBytes({ ...base, past: 0, L: 0 });
  console.log(`float32: step ${ms(pair.medianMs)}; against an empty cache ${ms(pair.baseMedianMs)} ` +
    `(projections ${ms(pair.baseMedianMs - call)}: ${share(weights, pair.baseMedianMs - call)}; ` +
    `the rest of a call ${ms(call)}, a tiny module's step); attention over ${D2.past + 1} keys ` +
    `${ms(attention)} (${share(stepBytes(base) - weights, attention)}); ${pair.reps} pairs, ` +
    `median ratio ${pair.pairRatio.toFixed(3)}`);
}
for (const name of names) {
  const w = { ...base, ...VARIANTS[name] };
  const other = await stepOf(w);
  const pair = await measurePair(f32.run, other.run, timing);
  console.log(`${name}: ${ms(pair.medianMs)} against float32's ${ms(pair.baseMedianMs)}, median of ` +
    `${pair.reps} pairs' ratios ${pair.pairRatio.toFixed(3)}x; reads ${(stepBytes(w) / 1e6).toFixed(1)} MB: ` +
    `${share(stepBytes(w), pair.medianMs)} (float32 ${share(stepBytes(base), pair.baseMedianMs)}); ` +
    `memory ${other.memory} bytes; max |output - float32's| ${maxDiff(other.output(), f32.output()).toExponential(2)}`);
}
console.log(`load average ${loadavg().map((l) => l.toFixed(2)).join(' ')} at end`);
process.exit(0);

#!/usr/bin/env node
// Issue 23's row G3 (a sliding-window cache that never grows): D1's module (E = 768, H = 12)
// with rotary {dim: 64} and a window of 4096, causal, decoding into a rolling cache of 4096
// slots, one token a call (a window of 4096 leaves room for one new key a call). The step at
// position 4096 (the ring just full) against the same step at position 100,000 (the ring
// wrapped 24 times), one cache each, timed in alternation (the median of the pairs' ratios:
// each pair shares what the machine did meanwhile), each step after rolling its cache back with
// truncate (in the timed call, for both). Target: equal within 5 %.
// Usage: node bench/rolling_step.mjs [threads] (after npm run build).
import { cpus, loadavg } from 'node:os';
import { loadMHA } from '../web/src/index.js';
import { config } from './lib/workloads.mjs';
import { measurePair } from './lib/timing.mjs';

const E = 768, H = 12, WINDOW = 4096, EARLY = 4096, LATE = 100_000;

const threads = Number(process.argv[2] ?? cpus().length);
const lib = await loadMHA({ threads });
const random = (n) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: H, batchFirst: true,
  rotary: { dim: 64 }, window: WINDOW });
await mha.loadStateDict(Object.fromEntries(mha.parameters.map(({ name, shape }) =>
  [name, { data: random(shape.reduce((a, b) => a * b)), shape }])));
const token = { data: random(E), shape: [1, 1, E] };
// Two rolling caches of the module, one filled to each position, one token a call.
const filledTo = async (position) => {
  const cache = mha.createKVCache({ batchSize: 1, maxLength: WINDOW, rolling: true });
  while (cache.length < position) {
    await mha.forward(token, token, token, { cache, isCausal: true, needWeights: false });
  }
  return cache;
};
const start = performance.now();
const early = await filledTo(EARLY);
const late = await filledTo(LATE);
const fillS = (performance.now() - start) / 1000;
// The two steps timed in alternation (measurePair), each after rolling its cache back.
const stepAt = (cache, position) => async () => {
  await cache.truncate(position);
  await mha.forward(token, token, token, { cache, isCausal: true, needWeights: false });
};
const { medianMs, baseMedianMs, pairRatio, reps } =
  await measurePair(stepAt(early, EARLY), stepAt(late, LATE), config.decodeTiming);
console.log(`G3: rolling cache of ${WINDOW} slots, window ${WINDOW}, E=${E} H=${H}, rotary 64; ` +
            `${lib.info.build}, ${lib.info.threads} threads; ${cpus()[0].model}; ` +
            `load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
console.log(`step at position ${EARLY}: ${(baseMedianMs * 1000).toFixed(1)} us; at ${LATE}: ` +
            `${(medianMs * 1000).toFixed(1)} us; median of ${reps} alternated pairs' ratios ` +
            `${pairRatio.toFixed(3)}x (target within 5 %); cache.held ${late.held}, cache.bytes ` +
            `${late.bytes}; filling the caches (${EARLY + LATE} single steps) took ${fillS.toFixed(1)} s`);

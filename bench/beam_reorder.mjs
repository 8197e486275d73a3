#!/usr/bin/env node
// Issue 23's row G2 (Whisper base's decoder attention with beams): 4 beams, E = 512, H = 8; a
// step is the self-attention of one token per beam against 64 self keys (the cache rolled back to
// 64 before each step, not timed) plus the cross-attention against 1500 encoder keys per beam;
// the reorder is cache.reorder on the self-attention cache, as Hugging Face's _reorder_cache does
// for Whisper (the encoder keys are the same in every beam), and, for comparison, on the
// cross-attention cache too. Each reorder is timed in alternation with the step (measurePair,
// workloads.json's decoding rule): the figure is the median of the pairs' ratios reorder / step,
// the reorder's share of the step (target <= 5 %).
// Usage: node bench/beam_reorder.mjs [threads] (after npm run build).
import { cpus, loadavg } from 'node:os';
import { loadMHA } from '../web/src/index.js';
import { config } from './lib/workloads.mjs';
import { measurePair } from './lib/timing.mjs';

const E = 512, H = 8, BEAMS = 4, SELF_KEYS = 64, ENCODER_KEYS = 1500, MAX_TARGET = 448;
const REORDERS = { 'a beam copied, one dropped': [1, 1, 3, 0], 'every beam moved (a cycle)': [1, 2, 3, 0] };

const threads = Number(process.argv[2] ?? cpus().length);
const lib = await loadMHA({ threads });
const random = (n) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
async function randomModule() {
  const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: H, batchFirst: true });
  await mha.loadStateDict(Object.fromEntries(mha.parameters.map(({ name, shape }) =>
    [name, { data: random(shape.reduce((a, b) => a * b)), shape }])));
  return mha;
}
const selfAttention = await randomModule();
const crossAttention = await randomModule();
const tensor = (rows) => ({ data: random(BEAMS * rows * E), shape: [BEAMS, rows, E] });
const selfCache = selfAttention.createKVCache({ batchSize: BEAMS, maxLength: MAX_TARGET });
const crossCache = crossAttention.createKVCache({ batchSize: BEAMS, maxLength: ENCODER_KEYS });
const prompt = tensor(SELF_KEYS);
const encoder = tensor(ENCODER_KEYS);
await selfAttention.forward(prompt, prompt, prompt, { cache: selfCache, isCausal: true, needWeights: false });
await crossAttention.forward(tensor(1), encoder, encoder, { cache: crossCache, needWeights: false });

const token = tensor(1);
const step = async () => {
  const { output } = await selfAttention.forward(token, token, token, { cache: selfCache, needWeights: false });
  await crossAttention.forward(output, null, null, { cache: crossCache, needWeights: false });
};
const rollBack = () => selfCache.truncate(SELF_KEYS);
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
console.log(`G2: ${BEAMS} beams, E=${E} H=${H}, ${SELF_KEYS} self keys, ${ENCODER_KEYS} encoder keys; ` +
            `${lib.info.build}, ${lib.info.threads} threads; ${cpus()[0].model}; load average ${load()}`);
const us = (ms) => `${(ms * 1000).toFixed(1)} us`;
for (const [what, order] of Object.entries(REORDERS)) {
  const indices = Int32Array.from(order);
  const share = async (reorder) => {
    const { medianMs, baseMedianMs, pairRatio, reps } = await measurePair(step, reorder, config.decodeTiming,
      { a: rollBack });
    return `${us(medianMs)} against a step of ${us(baseMedianMs)} (self + cross attention): ` +
           `${(100 * pairRatio).toFixed(2)} % of the step (median of ${reps} pairs' ratios)`;
  };
  const self = await share(() => selfCache.reorder(indices));
  const both = await share(async () => {
    await selfCache.reorder(indices);
    await crossCache.reorder(indices);
  });
  console.log(`reorder ${order.join(',')} (${what}): self cache ${self}; self and cross caches ${both}; ` +
              `load average ${load()}`);
}

#!/usr/bin/env node
// Issue 23's row G1 (a ragged batch): 4 prompts of 900, 950, 1000 and 1023 tokens, left-padded
// to 1023 slots, E = 768, H = 12 (D1's module), decoded one step each in one call (key padding
// over the pads, Hugging Face's position_ids as `positions` under rotary {dim: 64}), against
// the single-sequence step of the same module after 1023 tokens: the figure is the median of the
// ratios batch / single (4 single steps would be 4x; target <= 2.5x). Where the time goes: the
// same two steps against caches of one key each (their projections, the attention next to
// nothing), and the difference (the attention over the cached keys). The four steps are timed
// in rotation (measureRounds, workloads.json's decoding rule; each cache rolled back before its
// step, not timed).
// Usage: node bench/ragged_batch.mjs [threads] (after npm run build).
import { cpus, loadavg } from 'node:os';
import { loadMHA } from '../web/src/index.js';
import { config } from './lib/workloads.mjs';
import { measureRounds } from './lib/timing.mjs';

const E = 768, H = 12, SLOTS = 1023, LENGTHS = [900, 950, 1000, 1023];
const N = LENGTHS.length;

const threads = Number(process.argv[2] ?? cpus().length);
const lib = await loadMHA({ threads });
const random = (n) => Float32Array.from({ length: n }, () => Math.random() - 0.5);
const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: H, batchFirst: true,
  rotary: { dim: 64 } });
await mha.loadStateDict(Object.fromEntries(mha.parameters.map(({ name, shape }) =>
  [name, { data: random(shape.reduce((a, b) => a * b)), shape }])));
const options = { isCausal: true, needWeights: false };
const tokens = (batch, rows) => ({ data: random(batch * rows * E), shape: [batch, rows, E] });

// A cache of `batch` entries filled with prompts of `slots` tokens (`prompt`: the forward's
// options beyond the cache) and a step of one token each after them (`step`: its options).
async function stepAfter(batch, slots, prompt = {}, step = {}) {
  const cache = mha.createKVCache({ batchSize: batch, maxLength: slots + 1 });
  const rows = tokens(batch, slots);
  await mha.forward(rows, rows, rows, { ...options, ...prompt, cache });
  const token = tokens(batch, 1);
  return {
    run: () => mha.forward(token, token, token, { ...options, ...step, cache }),
    rollBack: () => cache.truncate(slots),
  };
}

// Entry n: SLOTS - LENGTHS[n] pads, then its tokens; the mask and positions of every slot.
const pads = LENGTHS.map((length) => SLOTS - length);
const padded = (slots) => Uint8Array.from({ length: N * slots }, (_, i) => (i % slots < pads[Math.floor(i / slots)] ? 1 : 0));
const ragged = await stepAfter(N, SLOTS, {
  keyPaddingMask: { data: padded(SLOTS), shape: [N, SLOTS] },
  positions: Int32Array.from({ length: N * SLOTS }, (_, i) => Math.max(1, i % SLOTS - pads[Math.floor(i / SLOTS)])),
}, { positions: Int32Array.from(LENGTHS), keyPaddingMask: { data: padded(SLOTS + 1), shape: [N, SLOTS + 1] } });
const single = await stepAfter(1, SLOTS);

// The four steps in rotation (measureRounds), so that the ratios and differences below share
// whatever the machine did meanwhile.
const steps = [single, ragged, await stepAfter(1, 1), await stepAfter(N, 1)];
const { reps, runs: [full1, fullN, short1, shortN] } = await measureRounds(
  steps.map(({ run, rollBack }) => ({ run, before: rollBack })), config.decodeTiming);
const load = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const us = (ms) => `${(ms * 1000).toFixed(1)} us`;
console.log(`G1: ${N} left-padded prompts (${LENGTHS.join(', ')} tokens in ${SLOTS} slots), ` +
            `E=${E} H=${H}, rotary 64; ${lib.info.build}, ${lib.info.threads} threads; ` +
            `${cpus()[0].model}; load average ${load()}`);
console.log(`single-sequence step ${us(full1.medianMs)}, batch step ${us(fullN.medianMs)}: median of ` +
            `${reps} rounds' ratios ${fullN.ratio.toFixed(2)}x the single step ` +
            '(4 single steps: 4x; target <= 2.5x)');
const attention = (full, short) => full.medianMs - short.medianMs;
console.log(`where the time goes: against 1 cached key (the projections) single ${us(short1.medianMs)}, ` +
            `batch ${us(shortN.medianMs)} (${(shortN.medianMs / short1.medianMs).toFixed(2)}x); the rest ` +
            `(attention over the cache) single ${us(attention(full1, short1))}, batch ${us(attention(fullN, shortN))} ` +
            `(${(attention(fullN, shortN) / attention(full1, short1)).toFixed(2)}x); load average ${load()}`);

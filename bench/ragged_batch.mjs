#!/usr/bin/env node
// Issue 23's row G1 (a ragged batch): 4 prompts of 900, 950, 1000 and 1023 tokens, left-padded
// to 1023 slots, E = 768, H = 12 (D1's module), decoded one step each in one call (key padding
// over the pads, Hugging Face's position_ids as `positions` under rotary {dim: 64}), against
// the single-sequence step of the same module after 1023 tokens. Each step is timed by
// workloads.json's decoding rule (median; the caches rolled back before each, not timed); the
// figure is the batch step over the single one (4 single steps would be 4x; target <= 2.5x).
// Usage: node bench/ragged_batch.mjs [threads] (after npm run build).
import { cpus, loadavg } from 'node:os';
import { loadMHA } from '../web/src/index.js';
import { config } from './lib/workloads.mjs';
import { measure } from './lib/timing.mjs';

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

// Entry n: SLOTS - LENGTHS[n] pads, then its tokens; the mask and positions of every slot.
const pads = LENGTHS.map((length) => SLOTS - length);
const padded = (slots) => Uint8Array.from({ length: N * slots }, (_, i) => (i % slots < pads[Math.floor(i / slots)] ? 1 : 0));
const batchCache = mha.createKVCache({ batchSize: N, maxLength: SLOTS + 1 });
const prompts = { data: random(N * SLOTS * E), shape: [N, SLOTS, E] };
await mha.forward(prompts, prompts, prompts, { ...options, cache: batchCache,
  keyPaddingMask: { data: padded(SLOTS), shape: [N, SLOTS] },
  positions: Int32Array.from({ length: N * SLOTS }, (_, i) => Math.max(1, i % SLOTS - pads[Math.floor(i / SLOTS)])) });
const tokens = { data: random(N * E), shape: [N, 1, E] };
const batchStep = { ...options, cache: batchCache, positions: Int32Array.from(LENGTHS),
  keyPaddingMask: { data: padded(SLOTS + 1), shape: [N, SLOTS + 1] } };

const singleCache = mha.createKVCache({ batchSize: 1, maxLength: SLOTS + 1 });
const prompt = { data: random(SLOTS * E), shape: [1, SLOTS, E] };
await mha.forward(prompt, prompt, prompt, { ...options, cache: singleCache });
const token = { data: random(E), shape: [1, 1, E] };

const timing = config.decodeTiming;
const singleMs = (await measure(() => mha.forward(token, token, token, { ...options, cache: singleCache }),
  timing, () => singleCache.truncate(SLOTS))).medianMs;
const batchMs = (await measure(() => mha.forward(tokens, tokens, tokens, batchStep),
  timing, () => batchCache.truncate(SLOTS))).medianMs;
console.log(`G1: ${N} left-padded prompts (${LENGTHS.join(', ')} tokens in ${SLOTS} slots), ` +
            `E=${E} H=${H}, rotary 64; ${lib.info.build}, ${lib.info.threads} threads; ` +
            `${cpus()[0].model}; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
console.log(`single-sequence step: ${(singleMs * 1000).toFixed(1)} us; batch step: ` +
            `${(batchMs * 1000).toFixed(1)} us = ${(batchMs / singleMs).toFixed(2)}x the single step ` +
            '(4 single steps: 4x; target <= 2.5x)');

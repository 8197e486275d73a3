// Hand-built weights whose heads attend in readable patterns: to the previous token, to the first
// token, to the token itself, to the next token (cycled over the heads).
//
// How: every token's input starts with a positional code, m (cos, sin) pairs at frequencies
// w_k = 2*pi*k/P, then a "first token" flag, then random content. A shift head's query rotates the
// code by `shift` positions and its key keeps it, so q_i . k_j = g * sum_k cos(w_k (i + shift - j)),
// a Dirichlet kernel that peaks exactly at j = i + shift. The first-token head's query is a constant
// (its bias) and its key reads the flag. Values and the output projection are identities, so the
// output shows the content each head fetched.
import { createRng, normalTensor } from './random.js';

const PRESET_PATTERNS = [
  { name: 'previous token', shift: -1 },
  { name: 'first token', shift: null },
  { name: 'self', shift: 0 },
  { name: 'next token', shift: 1 },
];

const MAX_FREQUENCIES = 8;
const SCORE_MARGIN = 10; // logit gap between the intended key and any other: e^-10 leaks elsewhere

export function presetHeadNames(numHeads) {
  return Array.from({ length: numHeads }, (_, h) => PRESET_PATTERNS[h % PRESET_PATTERNS.length].name);
}

// Returns { stateDict, inputs } for sequence-first inputs (L, N, E) and (S, N, E).
export function buildPreset({ embedDim, numHeads, queryLength, keyLength, batch, selfAttention, seed }) {
  const e = embedDim;
  const headDim = e / numHeads;
  if (!Number.isInteger(headDim)) {
    throw new Error(`heads (${numHeads}) must divide embed dim (${e})`);
  }
  const frequencies = Math.min(MAX_FREQUENCIES, Math.floor(headDim / 2), Math.floor((e - 1) / 2));
  if (frequencies < 1) {
    throw new Error(`the readable preset needs embed dim / heads >= 2 and embed dim >= 3; got ${e} / ${numHeads}`);
  }
  const longest = Math.max(queryLength, keyLength);
  const period = 2 * longest + 1; // > every distance |i + shift - j|, so only one peak
  const omegas = Array.from({ length: frequencies }, (_, k) => (2 * Math.PI * (k + 1)) / period);
  const kernel = (x) => omegas.reduce((sum, w) => sum + Math.cos(w * x), 0);
  let gap = Infinity;
  for (let x = 1; x <= longest + 1; x++) gap = Math.min(gap, kernel(0) - kernel(x));
  const scale = Math.sqrt(headDim); // undoes the engine's 1/sqrt(head_dim)
  const shiftGain = (SCORE_MARGIN / gap) * scale;
  const firstGain = (SCORE_MARGIN + Math.log(longest)) * scale;
  const flagColumn = 2 * frequencies;

  const inProjWeight = new Float32Array(3 * e * e);
  const inProjBias = new Float32Array(3 * e);
  const setWeight = (row, column, value) => {
    inProjWeight[row * e + column] = value;
  };
  for (let h = 0; h < numHeads; h++) {
    const { shift } = PRESET_PATTERNS[h % PRESET_PATTERNS.length];
    const q = h * headDim; // first row of this head's query block
    const k = e + h * headDim;
    if (shift === null) {
      inProjBias[q] = firstGain;
      setWeight(k, flagColumn, 1);
      continue;
    }
    omegas.forEach((w, f) => {
      const c = Math.cos(w * shift);
      const s = Math.sin(w * shift);
      setWeight(q + 2 * f, 2 * f, shiftGain * c);
      setWeight(q + 2 * f, 2 * f + 1, -shiftGain * s);
      setWeight(q + 2 * f + 1, 2 * f, shiftGain * s);
      setWeight(q + 2 * f + 1, 2 * f + 1, shiftGain * c);
      setWeight(k + 2 * f, 2 * f, 1);
      setWeight(k + 2 * f + 1, 2 * f + 1, 1);
    });
  }
  for (let r = 0; r < e; r++) setWeight(2 * e + r, r, 1);
  const outProjWeight = new Float32Array(e * e);
  for (let r = 0; r < e; r++) outProjWeight[r * e + r] = 1;

  const rng = createRng(seed);
  const tokens = (length) => {
    const x = normalTensor([length, batch, e], rng);
    for (let p = 0; p < length; p++) {
      for (let n = 0; n < batch; n++) {
        const row = (p * batch + n) * e;
        omegas.forEach((w, f) => {
          x.data[row + 2 * f] = Math.cos(w * p);
          x.data[row + 2 * f + 1] = Math.sin(w * p);
        });
        x.data[row + flagColumn] = p === 0 ? 1 : 0;
      }
    }
    return x;
  };
  const query = tokens(queryLength);
  const key = selfAttention ? query : tokens(keyLength);
  return {
    stateDict: {
      in_proj_weight: { data: inProjWeight, shape: [3 * e, e] },
      in_proj_bias: { data: inProjBias, shape: [3 * e] },
      'out_proj.weight': { data: outProjWeight, shape: [e, e] },
      'out_proj.bias': { data: new Float32Array(e), shape: [e] },
    },
    inputs: { query, key, value: key },
  };
}

// Seeded random numbers, weights and inputs, so a seed always shows the same maps.

// mulberry32: a tiny 32-bit generator, good enough for demo data; returns floats in [0, 1).
export function createRng(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function uniformTensor(shape, rng, bound) {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = (2 * rng() - 1) * bound;
  return { data, shape };
}

// Standard normal samples (Box-Muller).
export function normalTensor(shape, rng) {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) {
    const u = 1 - rng();
    data[i] = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * rng());
  }
  return { data, shape };
}

// Weights drawn like PyTorch initialises nn.MultiheadAttention (xavier-uniform in_proj,
// Linear-style out_proj), with small random biases so they matter too.
export function randomStateDict(embedDim, rng) {
  const e = embedDim;
  return {
    in_proj_weight: uniformTensor([3 * e, e], rng, Math.sqrt(6 / (4 * e))),
    in_proj_bias: uniformTensor([3 * e], rng, 0.1),
    'out_proj.weight': uniformTensor([e, e], rng, 1 / Math.sqrt(e)),
    'out_proj.bias': uniformTensor([e], rng, 0.1),
  };
}

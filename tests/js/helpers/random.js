// Reproducible random tensors and modules for the reliability tests.

// Numbers in [0, 1), reproducible: an LCG seeded by `seed`.
export function lcg(seed) {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

// Deterministic pseudo-random floats in [-1, 1) (an LCG seeded by `seed`).
export function randomTensor(shape, seed) {
  const random = lcg(seed);
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1)).map(() => 2 * random() - 1);
  return { data, shape };
}

// A module of `config` with random parameters drawn from `seed`.
export function randomModule(lib, config, seed) {
  const mha = lib.createMultiheadAttention(config);
  const stateDict = {};
  mha.parameters.forEach(({ name, shape }, i) => {
    stateDict[name] = randomTensor(shape, seed * 100 + i).data;
  });
  mha.loadStateDict(stateDict);
  return mha;
}

// Bitwise equality of two results (NaN-safe): the same inputs must give the
// very same floats however calls interleave.
export function sameBits(a, b) {
  const same = (x, y) => (x === null || y === null ? x === y
    : JSON.stringify(x.shape) === JSON.stringify(y.shape) &&
      Buffer.compare(Buffer.from(x.data.buffer, x.data.byteOffset, x.data.byteLength),
        Buffer.from(y.data.buffer, y.data.byteOffset, y.data.byteLength)) === 0);
  return same(a.output, b.output) && same(a.weights ?? null, b.weights ?? null);
}

// The forwards bench/proxy_cost.mjs times, the same through the proxy (page.html) and inside a
// worker (worker.js): a module with fixed weights and one input per size.
export const SIZES = {
  tiny: { embedDim: 64, numHeads: 4, length: 4 },
  large: { embedDim: 512, numHeads: 8, length: 1024 },
};

function filled(shape, seed) {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.7311 + seed) * 0.1;
  return { data, shape };
}

// { [size]: () => ms of one awaited forward }, after 3 untimed ones each.
export async function prepareForwards(lib) {
  const timers = {};
  for (const [size, { embedDim: E, numHeads, length }] of Object.entries(SIZES)) {
    const mha = lib.createMultiheadAttention({ embedDim: E, numHeads });
    await mha.loadStateDict({
      in_proj_weight: filled([3 * E, E], 1), in_proj_bias: filled([3 * E], 2),
      'out_proj.weight': filled([E, E], 3), 'out_proj.bias': filled([E], 4),
    });
    const x = filled([length, 1, E], 5);
    const forward = () => mha.forward(x, x, x, { needWeights: false });
    for (let i = 0; i < 3; i++) await forward();
    timers[size] = async () => {
      const start = performance.now();
      await forward();
      return performance.now() - start;
    };
  }
  return timers;
}

// The forwards bench/proxy_cost.mjs times, the same through the proxy (page.js) and inside a
// worker (worker.js): a module with fixed weights and one input per size.
const SIZES = {
  tiny: { embedDim: 64, numHeads: 4, length: 4 },
  large: { embedDim: 512, numHeads: 8, length: 1024 },
};

function filled(shape, seed) {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.7311 + seed) * 0.1;
  return { data, shape };
}

const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];

// Median ms of `reps` awaited forwards (after 3 untimed ones) of size `size`.
export async function timeForwards(lib, size, reps) {
  const { embedDim: E, numHeads, length } = SIZES[size];
  const mha = lib.createMultiheadAttention({ embedDim: E, numHeads });
  await mha.loadStateDict({
    in_proj_weight: filled([3 * E, E], 1), in_proj_bias: filled([3 * E], 2),
    'out_proj.weight': filled([E, E], 3), 'out_proj.bias': filled([E], 4),
  });
  const x = filled([length, 1, E], 5);
  const forward = () => mha.forward(x, x, x, { needWeights: false });
  for (let i = 0; i < 3; i++) await forward();
  const times = [];
  for (let i = 0; i < reps; i++) {
    const start = performance.now();
    await forward();
    times.push(performance.now() - start);
  }
  mha.dispose();
  return median(times);
}

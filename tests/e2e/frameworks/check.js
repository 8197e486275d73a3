// What every framework test page runs, in the browser or on the server: loadMHA() as the app
// imports it, then one forward of a fixed module on fixed inputs; the test compares the result
// with the same function run by the package in Node (tests/e2e/frameworks.test.mjs).
const fill = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.7311 + seed) * 0.5);

export async function check(loadMHA) {
  // Two calls, one library (and on a page one proxy worker: React StrictMode's second effect).
  const [lib, again] = await Promise.all([loadMHA(), loadMHA()]);
  const E = 8;
  const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: 2 });
  try {
    await mha.loadStateDict({
      in_proj_weight: fill(3 * E * E, 1), in_proj_bias: fill(3 * E, 2),
      'out_proj.weight': fill(E * E, 3), 'out_proj.bias': fill(E, 4),
    });
    const x = { data: fill(3 * E, 5), shape: [3, 1, E] };
    const { output } = await mha.forward(x, x, x, { needWeights: false });
    const { build, threads, proxy, threadsOffReason } = lib.info;
    return { build, threads, proxy, threadsOffReason, loadedOnce: lib === again, output: Array.from(output.data) };
  } finally {
    mha.dispose();
  }
}

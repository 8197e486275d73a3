// A small web app using mha-wasm as users do (imported by its package name), built from the
// `npm pack` tarball by each bundler in tests/e2e/bundlers.test.mjs. The page may set
// window.mhaOptions (loadMHA's options, e.g. wasmPaths); window.app resolves to what the test calls.
import { loadMHA } from 'mha-wasm';

const plain = (t) => t && { data: Array.from(t.data), shape: t.shape };
const tensor = (t) => t && { data: t.bool ? Uint8Array.from(t.data) : Float32Array.from(t.data), shape: t.shape };

function random(shape, seed) {
  const data = new Float32Array(shape.reduce((a, b) => a * b, 1));
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.7311 + seed) * 0.5;
  return { data, shape };
}

window.app = loadMHA(window.mhaOptions).then((lib) => ({
  info: lib.info,

  // A PyTorch fixture: config (the JS API's names), the .safetensors bytes, inputs and options.
  async runFixture({ config, bytes, inputs, options }) {
    const mha = lib.createMultiheadAttention(config);
    try {
      await mha.loadSafetensors(Uint8Array.from(bytes), { prefix: 'param.' });
      const { output, weights } = await mha.forward(tensor(inputs.query), tensor(inputs.key),
        tensor(inputs.value), { ...options, keyPaddingMask: tensor(inputs.keyPaddingMask) });
      return { output: plain(output), weights: plain(weights) };
    } finally {
      mha.dispose();
    }
  },

  // A forward of 100 ms at least (the sequence doubles until one takes that long: a fast machine
  // does 3072 tokens in less), and how often a 10 ms timer fired on this thread meanwhile.
  async ticksDuringForward() {
    const E = 256;
    const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: 4 });
    try {
      await mha.loadStateDict({
        in_proj_weight: random([3 * E, E], 1), in_proj_bias: random([3 * E], 2),
        'out_proj.weight': random([E, E], 3), 'out_proj.bias': random([E], 4),
      });
      for (let length = 3072; ; length *= 2) {
        const x = random([length, 1, E], 5);
        let ticks = 0;
        const timer = setInterval(() => { ticks++; }, 10);
        const start = performance.now();
        await mha.forward(x, x, x, { needWeights: false });
        const ms = performance.now() - start;
        clearInterval(timer);
        if (ms >= 100 || length >= 4 * 3072) return { ms, ticks, length };
      }
    } finally {
      mha.dispose();
    }
  },
}));

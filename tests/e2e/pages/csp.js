// The package on a page served with a strict Content-Security-Policy (tests/e2e/csp.test.mjs
// states it): loaded in the page's thread and through the proxy, a causal forward, then the same
// tokens decoded one at a time through a KV cache. window.cspTest: { result, violations }, result
// a Promise of { runs: [{ proxy, info, outputFinite, decodeError } or { proxy, error }],
// blobUrls: { made, live } };
// violations every securitypolicyviolation the page has heard (each is dispatched in a task of
// its own, so it may come after the error of the call it refused).
import { loadMHA } from '/web/src/browser.js';

const violations = [];
document.addEventListener('securitypolicyviolation', (event) => {
  violations.push(`${event.violatedDirective}: ${event.blockedURI || 'inline'} (${event.sourceFile}:${event.lineNumber})`);
});

// The Blob URLs made in this page and those still live (not revoked): the package revokes each
// once its worker has started.
const blobUrls = new Set();
let blobUrlsMade = 0;
const { createObjectURL, revokeObjectURL } = URL;
URL.createObjectURL = (object) => {
  const url = createObjectURL.call(URL, object);
  blobUrls.add(url);
  blobUrlsMade++;
  return url;
};
URL.revokeObjectURL = (url) => {
  blobUrls.delete(url);
  revokeObjectURL.call(URL, url);
};

const [L, E] = [6, 8];
const numbers = (length, seed) => Float32Array.from({ length }, (_, i) => Math.sin(seed + i * 0.731) / 2);
const STATE_DICT = {
  in_proj_weight: numbers(3 * E * E, 1), in_proj_bias: numbers(3 * E, 2),
  'out_proj.weight': numbers(E * E, 3), 'out_proj.bias': numbers(E, 4),
};
const tokens = { data: numbers(L * E, 5), shape: [L, 1, E] };

// The forward's output and the largest difference from it of the same tokens decoded.
async function run(proxy) {
  const lib = await loadMHA({ proxy });
  const mha = lib.createMultiheadAttention({ embedDim: E, numHeads: 2 });
  try {
    await mha.loadStateDict(STATE_DICT);
    const { output } = await mha.forward(tokens, tokens, tokens, { isCausal: true, needWeights: false });
    const cache = mha.createKVCache({ batchSize: 1, maxLength: L });
    let decodeError = 0;
    for (let t = 0; t < L; t++) {
      const token = { data: tokens.data.slice(t * E, (t + 1) * E), shape: [1, 1, E] };
      const step = (await mha.forward(token, token, token, { cache, needWeights: false })).output;
      for (let i = 0; i < E; i++) decodeError = Math.max(decodeError, Math.abs(step.data[i] - output.data[t * E + i]));
    }
    return { proxy, info: lib.info, outputFinite: output.data.every(Number.isFinite), decodeError };
  } finally {
    mha.dispose();
  }
}

const attempt = (proxy) => run(proxy).catch((error) => ({ proxy, error: `${error.name}: ${error.message}` }));

window.cspTest = {
  violations,
  result: (async () => {
    const runs = [await attempt(false), await attempt(true)];
    return { runs, blobUrls: { made: blobUrlsMade, live: blobUrls.size } };
  })(),
};

// A plain JavaScript reference of the page's own problems (preset or random weights in PyTorch's
// layout, sequence-first inputs), in float64, following docs/design.md's order of operations: rotary,
// scale, soft-cap, ALiBi, masks and window, softmax with sinks, weights . v, output projection.
// The page compares the engine's result with it, so every option on screen is checked where it is
// shown.
const MAX_MULTIPLY_ADDS = 3e7; // a few hundred ms of plain JS at most

// The ALiBi paper's slopes for numHeads heads (docs/design.md, step 6).
export function alibiPaperSlopes(numHeads) {
  const p = 2 ** Math.floor(Math.log2(numHeads));
  return Array.from({ length: numHeads }, (_, h) => (h < p ? 2 ** (-8 * (h + 1) / p) : 2 ** (-4 * (2 * (h - p) + 1) / p)));
}

// Whether query i may see key j under the mask options and the window (positions i and j).
function allowed(options, window, n, i, j, s) {
  if (options.keyPaddingMask?.data[n * s + j]) return false;
  if (options.isCausal && j > i) return false;
  if (typeof window === 'number') return j > i - window;
  if (window) return j >= i - window[0] && j <= i + window[1];
  return true;
}

function project(x, rows, weight, bias, first, e) {
  const out = new Float64Array(rows * e);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < e; o++) {
      let sum = bias ? bias[first + o] : 0;
      const w = (first + o) * e;
      for (let c = 0; c < e; c++) sum += weight[w + c] * x[r * e + c];
      out[r * e + o] = sum;
    }
  }
  return out;
}

// Rotary positions in place as the page sets them (docs/design.md, "Decoding: KV cache,
// grouped-query heads, rotary positions": every feature of a head, rotate-half pairs i and i + d/2): row r of x (rows x e) turned by the angles of
// position r, as the engine does without a cache.
function rotate(x, rows, e, d, base) {
  const half = d / 2;
  for (let r = 0; r < rows; r++) {
    for (let head = 0; head < e / d; head++) {
      for (let i = 0; i < half; i++) {
        const angle = r * base ** (-2 * i / d);
        const [a, b] = [i, i + half];
        const [u, v] = [x[r * e + head * d + a], x[r * e + head * d + b]];
        x[r * e + head * d + a] = u * Math.cos(angle) - v * Math.sin(angle);
        x[r * e + head * d + b] = u * Math.sin(angle) + v * Math.cos(angle);
      }
    }
  }
}

// Softmax of one row of scores (-Infinity where masked) with an optional sink logit; a row with
// no key to attend is NaN, sink or not.
function softmaxRow(scores, sink) {
  const top = Math.max(...scores, sink ?? -Infinity);
  if (scores.every((v) => v === -Infinity)) return scores.map(() => NaN);
  const exps = scores.map((v) => Math.exp(v - top));
  const total = exps.reduce((a, b) => a + b, 0) + (sink === undefined ? 0 : Math.exp(sink - top));
  return exps.map((v) => v / total);
}

// request: the page's forward request. Returns { output, weights } as the engine shapes them, or
// { skipped: why } for problems it does not cover.
export function referenceForward({ config, params, inputs, options }) {
  if (params.kind !== 'stateDict') return { skipped: 'weights from a file' };
  const { query, key } = inputs;
  const [l, batch, e] = query.shape;
  const s = key.shape[0];
  const h = config.numHeads;
  const d = e / h;
  if (batch * ((2 * l + 2 * s) * e * e + 2 * h * l * s * d) > MAX_MULTIPLY_ADDS) {
    return { skipped: 'too large for the JS reference' };
  }
  const t = params.tensors;
  const scale = config.scale ?? 1 / Math.sqrt(d);
  const slopes = config.alibi && (config.alibi.slopes ?? alibiPaperSlopes(h));
  const averaged = options.averageAttnWeights;
  const weights = options.needWeights ? new Float32Array(batch * (averaged ? 1 : h) * l * s) : null;
  const output = new Float32Array(l * batch * e);
  const rowsOf = (x, n, length) => Float64Array.from({ length: length * e }, (_, i) => x.data[(Math.floor(i / e) * batch + n) * e + (i % e)]);
  for (let n = 0; n < batch; n++) {
    const qx = rowsOf(query, n, l);
    const kx = rowsOf(key, n, s);
    const vx = rowsOf(inputs.value, n, s);
    const [w, b] = [t.in_proj_weight.data, t.in_proj_bias.data];
    const [q, k, v] = [project(qx, l, w, b, 0, e), project(kx, s, w, b, e, e), project(vx, s, w, b, 2 * e, e)];
    if (config.rotary) [[q, l], [k, s]].forEach(([x, rows]) => rotate(x, rows, e, d, config.rotary.base));
    const attended = new Float64Array(l * e);
    for (let head = 0; head < h; head++) {
      for (let i = 0; i < l; i++) {
        const scores = Array.from({ length: s }, (_, j) => {
          let score = 0;
          for (let c = head * d; c < (head + 1) * d; c++) score += q[i * e + c] * k[j * e + c];
          score *= scale;
          if (config.softcap) score = config.softcap * Math.tanh(score / config.softcap);
          if (slopes) score += config.alibi.symmetric ? -slopes[head] * Math.abs(j - i) : slopes[head] * (j - i);
          const mask = options.attnMask?.data; // bool (1: may not attend) or additive float
          if (mask instanceof Uint8Array && mask[i * s + j]) return -Infinity;
          if (mask instanceof Float32Array) score += mask[i * s + j];
          return allowed(options, config.window, n, i, j, s) ? score : -Infinity;
        });
        const p = softmaxRow(scores, config.sinks ? t.sinks.data[head] : undefined);
        p.forEach((pj, j) => {
          if (weights) weights[((n * (averaged ? 1 : h) + (averaged ? 0 : head)) * l + i) * s + j] += averaged ? pj / h : pj;
          for (let c = head * d; c < (head + 1) * d; c++) attended[i * e + c] += pj * v[j * e + c];
        });
      }
    }
    const out = project(attended, l, t['out_proj.weight'].data, t['out_proj.bias'].data, 0, e);
    for (let i = 0; i < l; i++) output.set(out.subarray(i * e, (i + 1) * e), (i * batch + n) * e);
  }
  return {
    output: { data: output, shape: [l, batch, e] },
    weights: weights && { data: weights, shape: averaged ? [batch, l, s] : [batch, h, l, s] },
  };
}

// The rows decoding `tokens` (count x E, one sequence) one token at a time with the request's
// module gives: incremental decoding is exact, so they are the rows of one causal forward over the
// sequence (docs/design.md). Returns { output: count x E, weights: count x count averaged over heads },
// or { skipped: why }.
export function referenceDecode(request, tokens, count) {
  const x = { data: tokens, shape: [count, 1, tokens.length / count] };
  const options = { isCausal: true, needWeights: true, averageAttnWeights: true };
  const result = referenceForward({ ...request, inputs: { query: x, key: x, value: x }, options });
  return result.skipped ? result : { output: result.output.data, weights: result.weights.data };
}

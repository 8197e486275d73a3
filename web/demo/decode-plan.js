// What the decoding mode's plans share, and the plain one: the current settings' module reads the
// query tokens (batch item 0) one at a time, each step appending that token's key and value to a
// KV cache and attending to every key so far. A plan says what each step feeds and how the steps
// are drawn; the view (decode-view.js) runs the steps. Each step's row of weights (averaged over
// heads) joins a map of step x key that grows row by row.
import { attachTooltip, drawHeatmap, drawLegend, scaleRange } from './heatmap.js';
import { missingMass } from './row-mass.js';

const byId = (id) => document.getElementById(id);

export function formatTime(ms) {
  return ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`;
}

// Row t of batch item 0 of the query, as a Float32Array of E values.
function tokenData(request, t) {
  const { query } = request.inputs;
  const e = query.shape.at(-1);
  let offset = t * e; // (L, E)
  if (query.shape.length === 3) {
    const batchFirst = request.config.batchFirst;
    offset = batchFirst ? t * e : t * query.shape[1] * e; // (1.., L, E) or (L, N, E)
  }
  return query.data.slice(offset, offset + e);
}

// The first `count` query tokens of batch item 0, back to back (count x E).
export function sequenceTokens(request, count) {
  const e = request.inputs.query.shape.at(-1);
  const tokens = new Float32Array(count * e);
  for (let t = 0; t < count; t++) tokens.set(tokenData(request, t), t * e);
  return tokens;
}

export function sequenceLength(request) {
  const { query } = request.inputs;
  return query.shape.length === 3 && request.config.batchFirst ? query.shape[1] : query.shape[0];
}

// The largest |a - b| over the first `count` values; NaN in one only is an infinite error (a query
// with no key to attend is NaN in both).
export function maxAbsDiff(a, b, count = b.length) {
  let max = 0;
  for (let i = 0; i < count; i++) {
    if (Number.isNaN(a[i]) && Number.isNaN(b[i])) continue;
    const d = Math.abs(a[i] - b[i]);
    if (!(d <= max)) max = Number.isNaN(d) ? Infinity : d;
  }
  return max;
}

// Draws rows (Float32Array per step: its weights over the keys so far) as a steps x `length` map
// into `canvas`. Grey (NaN) cells are keys the step could not use: past a row's end (not in the
// cache yet), or where absent(step, key) says why (a pad, a key the rolling cache dropped), so
// those read apart from weights that are merely small. describe(step, key, weight) is the
// tooltip's text for the others.
export function drawStepMap(canvas, tooltip, rows, length, range, describe, absent = () => null) {
  const values = new Float32Array(rows.length * length).fill(NaN);
  rows.forEach((row, t) => {
    values.set(row, t * length);
    for (let k = 0; k < row.length; k++) if (absent(t, k)) values[t * length + k] = NaN;
  });
  const cell = length > 320 ? 320 / length : Math.min(Math.floor(320 / length), 24);
  canvas.hidden = false;
  drawHeatmap(canvas, values, rows.length, length, { scale: 'sequential', range, cellWidth: cell });
  attachTooltip(canvas, tooltip, rows.length, length, (t, k) => {
    if (k >= rows[t].length) return `step ${t}: key ${k} not in the cache yet`;
    const why = absent(t, k);
    return why ? `step ${t}: key ${k} ${why}` : describe(t, k, rows[t][k]);
  });
}

// The colour range of several maps' rows, with the legend drawn for it.
export function drawStepLegend(rowSets) {
  const range = scaleRange(rowSets.flat().flatMap((row) => [...row]), 'sequential');
  drawLegend(byId('decode-legend'), { scale: 'sequential', range, label: 'weight' });
  return range;
}

// One sequence, the cache sized for it: each step's row equals that row of a causal forward.
export class SequencePlan {
  constructor(request) {
    this.request = request;
    this.steps = sequenceLength(request);
    this.cacheOptions = { batchSize: 1, maxLength: this.steps, rolling: false };
    this.rows = []; // Float32Array per step: its weights over keys 0..step
    this.times = [];
    this.cacheLength = 0;
  }

  input(t) {
    const data = tokenData(this.request, t);
    return { token: { data, shape: [1, data.length] } };
  }

  record(t, step) {
    this.rows.push(step.weights.data);
    this.times.push(step.timeMs);
    this.cacheLength = step.length;
  }

  // What a sink takes from the last row (0 without sinks).
  sink() {
    const steps = this.rows.length;
    return ((steps && missingMass(this.rows[steps - 1], 1, steps)) || [0])[0];
  }

  // Fields of the page's decode-result element (machine-readable, for tests).
  state() {
    const last = this.rows.at(-1);
    return { missingMass: String(this.sink()), row: last ? JSON.stringify(Array.from(last)) : '' };
  }

  // The status line's end: what the cache holds after the last step.
  summary() {
    const sink = this.sink();
    return `the cache holds ${this.cacheLength} key${this.cacheLength === 1 ? '' : 's'}` +
      `${sink ? ` · the sink takes ${sink.toPrecision(3)} of this row` : ''}`;
  }

  // absent(step, key): why a key the step attended over is not drawn, or null.
  draw(tooltip, absent) {
    const range = drawStepLegend([this.rows]);
    drawStepMap(byId('decode-canvas'), tooltip, this.rows, this.steps, range, (t, k, w) =>
      `step ${t} (${formatTime(this.times[t])}) · query ${t} → key ${k}: ${w.toPrecision(4)}` +
      ` · row sum ${this.rows[t].reduce((a, b) => a + b, 0).toPrecision(4)}`, absent);
  }
}

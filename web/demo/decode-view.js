// The decoding mode: the current settings' module reads the query tokens (batch item 0) one at a
// time, each step appending that token's key and value to a KV cache and attending to every key
// so far. Each step's row of weights (averaged over heads) joins a map of step x key that grows
// row by row; the time of every step is shown with it.
import { decodeStep, resetDecoder } from './engine.js';
import { attachTooltip, drawHeatmap, drawLegend } from './heatmap.js';
import { missingMass } from './row-mass.js';

const byId = (id) => document.getElementById(id);
const PLAY_PAUSE_MS = 150;

function formatTime(ms) {
  return ms < 1 ? `${(ms * 1000).toFixed(0)} µs` : `${ms.toFixed(2)} ms`;
}

// Row t of batch item 0 of the query, as an unbatched (1, E) tensor.
function tokenOf(request, t) {
  const { query } = request.inputs;
  const e = query.shape.at(-1);
  let offset = t * e; // (L, E)
  if (query.shape.length === 3) {
    const batchFirst = request.config.batchFirst;
    offset = batchFirst ? t * e : t * query.shape[1] * e; // (1.., L, E) or (L, N, E)
  }
  return { data: query.data.slice(offset, offset + e), shape: [1, e] };
}

function sequenceLength(request) {
  const { query } = request.inputs;
  return query.shape.length === 3 && request.config.batchFirst ? query.shape[1] : query.shape[0];
}

export class DecodeView {
  // currentRequest(): the forward request of the settings on screen (throws a readable Error).
  constructor(currentRequest, tooltip) {
    this.currentRequest = currentRequest;
    this.tooltip = tooltip;
    this.result = byId('decode-result'); // machine-readable state, for tests
    this.rows = []; // Float32Array per step: its weights over keys 0..step
    this.times = []; // ms per step
    this.cacheLength = 0; // as the engine reports it
    this.request = null;
    this.busy = false;
    this.playing = false;
    byId('decode-step').addEventListener('click', () => this.step());
    byId('decode-play').addEventListener('click', () => (this.playing ? this.pause() : this.play()));
    byId('decode-reset').addEventListener('click', () => this.reset());
    this.draw();
  }

  // Starts over: the cache is freed and the map cleared (also when the settings change).
  reset() {
    this.pause();
    resetDecoder();
    this.rows = [];
    this.times = [];
    this.cacheLength = 0;
    this.request = null;
    this.error = '';
    this.draw();
  }

  async step() {
    if (this.busy) return false;
    this.busy = true;
    try {
      this.request ??= this.currentRequest();
      const length = sequenceLength(this.request);
      if (this.rows.length >= length) return false;
      const step = await decodeStep(this.request, tokenOf(this.request, this.rows.length), length);
      this.rows.push(step.weights.data);
      this.times.push(step.timeMs);
      this.cacheLength = step.length;
      this.error = '';
      return this.rows.length < length;
    } catch (error) {
      this.error = error.message;
      this.pause();
      return false;
    } finally {
      this.busy = false;
      this.draw();
    }
  }

  async play() {
    this.playing = true;
    byId('decode-play').textContent = 'Pause';
    while (this.playing && (await this.step())) {
      await new Promise((resolve) => setTimeout(resolve, PLAY_PAUSE_MS));
    }
    this.pause();
  }

  pause() {
    this.playing = false;
    byId('decode-play').textContent = 'Play';
  }

  draw() {
    const steps = this.rows.length;
    const length = this.request ? sequenceLength(this.request) : steps;
    const status = byId('decode-status');
    const canvas = byId('decode-canvas');
    // What a sink takes from the last row (0 without sinks).
    const [sink] = (steps && missingMass(this.rows[steps - 1], 1, steps)) || [0];
    Object.assign(this.result.dataset, {
      missingMass: String(sink),
      steps: String(steps),
      row: steps ? JSON.stringify(Array.from(this.rows[steps - 1])) : '',
      timeMs: steps ? String(this.times[steps - 1]) : '',
      cacheLength: String(this.cacheLength),
      error: this.error ?? '',
    });
    byId('decode-step').disabled = steps > 0 && steps >= length;
    if (this.error) {
      status.textContent = `Decoding failed: ${this.error}`;
      return;
    }
    if (steps === 0) {
      canvas.hidden = true;
      byId('decode-legend').replaceChildren();
      status.textContent = 'Press Step to feed the first query token.';
      return;
    }
    // Keys not in the cache yet are NaN (grey).
    const values = new Float32Array(steps * length).fill(NaN);
    this.rows.forEach((row, t) => values.set(row, t * length));
    const range = [0, Math.max(...this.rows.flatMap((row) => [...row]))];
    drawLegend(byId('decode-legend'), { scale: 'sequential', range, label: 'weight' });
    const cell = length > 320 ? 320 / length : Math.min(Math.floor(320 / length), 24);
    canvas.hidden = false;
    drawHeatmap(canvas, values, steps, length, { scale: 'sequential', range, cellWidth: cell });
    attachTooltip(canvas, this.tooltip, steps, length, (t, k) => (k > t
      ? `step ${t}: key ${k} not in the cache yet`
      : `step ${t} (${formatTime(this.times[t])}) · query ${t} → key ${k}: ${values[t * length + k].toPrecision(4)}` +
        ` · row sum ${this.rows[t].reduce((a, b) => a + b, 0).toPrecision(4)}`));
    const sorted = [...this.times].sort((a, b) => a - b);
    status.textContent = `step ${steps} of ${length} · this step ${formatTime(this.times[steps - 1])} · ` +
      `median ${formatTime(sorted[sorted.length >> 1])} · the cache holds ${this.cacheLength} ` +
      `key${this.cacheLength === 1 ? '' : 's'}${sink ? ` · the sink takes ${sink.toPrecision(3)} of this row` : ''}`;
  }
}

// The decoding mode's batch of two prompts of different lengths, as a page generating for several
// prompts at once runs them: left padded to the longer one (Hugging Face's padding_side='left'), a
// key padding mask over the pads, and `positions` (Hugging Face's position_ids: the attention
// mask's cumulative sum - 1, pads 1) so that each row's rotary positions start at 0 at its first
// token. Both rows take one slot a step in one cache of two entries; each row is checked against
// the float64 reference of its prompt decoded alone, without padding. (Left padding alone shifts
// all of a row's positions by one amount and rotary scores depend on differences only, so rows
// decoded without `positions` would differ by rounding only; they are what Hugging Face passes,
// and they matter once padding sits inside a sequence.)
import { drawStepLegend, drawStepMap, maxAbsDiff, sequenceLength, sequenceTokens } from './decode-plan.js';
import { referenceDecode } from './reference.js';

const byId = (id) => document.getElementById(id);

// Hugging Face's position_ids of one row of an attention mask (1: a token, 0: a pad).
function positionIds(mask) {
  let sum = 0;
  return Int32Array.from(mask, (m) => {
    sum += m;
    return m ? sum - 1 : 1;
  });
}

export class BatchPlan {
  constructor(request) {
    if (!request.config.rotary) {
      throw new Error('a batch of prompts passes `positions`, the rotary position of each row: check "Rotary positions" under Scores');
    }
    const steps = sequenceLength(request);
    if (steps < 2) throw new Error('a batch of two prompts of different lengths needs a query length L of at least 2');
    this.request = request;
    this.steps = steps;
    this.e = request.inputs.query.shape.at(-1);
    // The second prompt is the first two thirds or so of the first: shorter, and at every slot a
    // different token from the first row's (its tokens sit `pad` slots later).
    this.lengths = [steps, steps - Math.max(1, Math.floor(steps / 3))];
    this.pads = this.lengths.map((n) => steps - n);
    this.attention = this.pads.map((pad) => Array.from({ length: steps }, (_, j) => (j < pad ? 0 : 1)));
    this.positions = this.attention.map(positionIds);
    this.prompts = this.lengths.map((n) => sequenceTokens(request, n));
    this.references = this.lengths.map((n, r) => referenceDecode(request, this.prompts[r], n));
    this.cacheOptions = { batchSize: 2, maxLength: steps, rolling: false };
    this.rows = [[], []]; // per batch row, per step: its weights over slots 0..step
    this.sent = []; // the positions each step passed, [row 0, row 1]
    this.times = []; // ms per step
    this.errors = [0, 0];
    this.cacheLength = 0;
  }

  input(t) {
    const { e } = this;
    const data = new Float32Array(2 * e); // a pad's embedding is zeros: the mask hides it anyway
    this.pads.forEach((pad, n) => {
      if (t >= pad) data.set(this.prompts[n].subarray((t - pad) * e, (t - pad + 1) * e), n * e);
    });
    const keys = t + 1; // the mask spans every slot the cache holds after this step
    const mask = Uint8Array.from({ length: 2 * keys }, (_, i) => 1 - this.attention[Math.floor(i / keys)][i % keys]);
    const positions = Int32Array.from(this.positions, (row) => row[t]);
    const shape = this.request.config.batchFirst ? [2, 1, e] : [1, 2, e];
    return { token: { data, shape }, options: { positions, keyPaddingMask: { data: mask, shape: [2, keys] } } };
  }

  // options: what input(t) gave the forward (its positions are shown as sent).
  record(t, step, options) {
    const keys = t + 1;
    this.sent.push(Array.from(options.positions ?? [], Number));
    this.times.push(step.timeMs);
    this.cacheLength = step.length;
    this.pads.forEach((pad, n) => {
      const row = step.weights.data.slice(n * keys, (n + 1) * keys);
      this.rows[n].push(row);
      const i = t - pad; // the step of the prompt alone
      const reference = this.references[n];
      if (i < 0 || reference.skipped) return; // a pad's query sees no key
      const length = this.lengths[n];
      const expected = new Float32Array(keys); // 0 on the pads
      expected.set(reference.weights.subarray(i * length, i * length + i + 1), pad);
      const output = step.output.data.subarray(n * this.e, (n + 1) * this.e);
      this.errors[n] = Math.max(this.errors[n], maxAbsDiff(row, expected),
        maxAbsDiff(output, reference.output.subarray(i * this.e, (i + 1) * this.e)));
    });
  }

  skipped() {
    return this.references.find((r) => r.skipped)?.skipped;
  }

  state() {
    return {
      rows: JSON.stringify(this.rows.map((steps) => steps.map((row) => Array.from(row)))),
      positions: JSON.stringify(this.sent),
      pads: JSON.stringify(this.pads),
      errors: this.skipped() ? '' : JSON.stringify(this.errors),
    };
  }

  summary() {
    const errors = this.skipped() ? `no reference (${this.skipped()})` : this.errors.map((e, n) => `row ${n} ${e.toExponential(2)}`).join(', ');
    return `the cache holds ${this.cacheLength} slots per row · max |err| vs each prompt alone (float64): ${errors}`;
  }

  draw(tooltip) {
    const range = drawStepLegend(this.rows);
    this.rows.forEach((rows, n) => {
      const pad = this.pads[n];
      const caption = byId(`decode-caption-${n}`);
      caption.hidden = false;
      caption.textContent = `row ${n}: a prompt of ${this.lengths[n]} tokens` +
        (pad ? ` after ${pad} pads (grey: masked, weight 0; its positions start at 0 at slot ${pad})` : '');
      const absent = (t, k) => (t < pad ? 'is not attended: this step\'s query is a pad, which sees no key' : k < pad ? 'is a pad: masked, weight 0' : null);
      drawStepMap(byId(n ? 'decode-canvas-1' : 'decode-canvas'), tooltip, rows, this.steps, range, (t, k, w) =>
        `row ${n}, step ${t} (position ${this.positions[n][t]}) → slot ${k} (position ${this.positions[n][k]}): ` +
        w.toPrecision(4), absent);
    });
  }
}

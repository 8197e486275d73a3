// The decoding mode's rolling window: a module with a finite left window never looks further back
// than it, so its cache is made with `rolling: true` and the smallest maxLength a one-token step
// allows (the left window + 1, docs/design.md "Generation"), and decoding runs on past maxLength: each
// new key takes the slot of the oldest (slot = position % maxLength). A strip shows the position
// each slot holds; every step is checked against the float64 reference of the whole sequence,
// which keeps every key (no cache, no rolling).
import { formatTime, maxAbsDiff, SequencePlan, sequenceTokens } from './decode-plan.js';
import { referenceDecode } from './reference.js';

const byId = (id) => document.getElementById(id);

// The keys before its own a query sees under a module's `window`: W sees W - 1, [left, right] left.
function leftWindow(window) {
  if (typeof window === 'number') return window - 1;
  if (Array.isArray(window)) return window[0];
  throw new Error('a rolling window needs a Window under Scores (W, or "left, right"): without one every key stays visible, so none may be dropped');
}

export class RollingPlan extends SequencePlan {
  constructor(request) {
    super(request);
    this.cacheOptions = { batchSize: 1, maxLength: leftWindow(request.config.window) + 1, rolling: true };
    this.reference = referenceDecode(request, sequenceTokens(request, this.steps), this.steps);
    this.error = 0; // the largest |err| of any output or weight so far
    this.held = 0;
    this.bytes = 0;
    this.heldSteps = []; // held after each step: the keys before length - held are gone
  }

  record(t, step) {
    super.record(t, step);
    this.held = step.held;
    this.heldSteps.push(step.held);
    this.bytes = step.bytes;
    if (this.reference.skipped) return;
    const e = step.output.data.length;
    const { output, weights } = this.reference;
    this.error = Math.max(this.error, maxAbsDiff(step.output.data, output.subarray(t * e, (t + 1) * e)),
      maxAbsDiff(step.weights.data, weights.subarray(t * this.steps, t * this.steps + t + 1)));
  }

  // The position each slot holds, from the cache's own length and held count: the last `held`
  // positions, position p in slot p % maxLength (null: a slot not filled yet).
  slots() {
    const { maxLength } = this.cacheOptions;
    const labels = new Array(maxLength).fill(null);
    for (let p = this.cacheLength - this.held; p < this.cacheLength; p++) labels[p % maxLength] = p;
    return labels;
  }

  errorText() {
    return this.reference.skipped ? `no reference (${this.reference.skipped})` : this.error.toExponential(2);
  }

  state() {
    return {
      ...super.state(),
      held: String(this.held),
      maxLength: String(this.cacheOptions.maxLength),
      bytes: String(this.bytes),
      slots: JSON.stringify(this.slots()),
      errors: this.reference.skipped ? '' : JSON.stringify([this.error]),
    };
  }

  summary() {
    return `length ${this.cacheLength} · held ${this.held} of maxLength ${this.cacheOptions.maxLength} · ` +
      `${this.bytes} bytes · max |err| vs the float64 reference ${this.errorText()}`;
  }

  draw(tooltip) {
    super.draw(tooltip, (t, k) => (k < t + 1 - this.heldSteps[t] ? 'dropped from the cache: its slot was reused (weight 0)' : null));
    const strip = byId('decode-slots');
    strip.hidden = false;
    const newest = this.cacheLength - 1;
    const { maxLength } = this.cacheOptions;
    strip.replaceChildren(...this.slots().map((position, slot) => {
      const cell = document.createElement('div');
      cell.className = `slot${position === newest ? ' newest' : ''}`;
      cell.dataset.position = position ?? '';
      cell.title = position === null ? `slot ${slot}: empty` : `slot ${slot} holds position ${position} (${position} % ${maxLength})`;
      cell.innerHTML = `<span>slot ${slot}</span><strong>${position ?? '·'}</strong>`;
      return cell;
    }));
    byId('decode-slots-note').hidden = false;
    byId('decode-slots-note').textContent = `The cache's ${maxLength} slots: position p lives in slot ` +
      `p % ${maxLength}, so from step ${maxLength + 1} each new key overwrites the oldest ` +
      `(last step ${formatTime(this.times.at(-1))}).`;
  }
}

// The decoding mode: runs a plan (one sequence, a batch of two prompts, or a rolling window) one
// step at a time through the engine's KV cache, with Step, Play and Reset, and shows its maps, the
// time of every step, and its machine-readable state for tests.
import { BatchPlan } from './batch-view.js';
import { formatTime, SequencePlan } from './decode-plan.js';
import { decodeStep, resetDecoder } from './engine.js';
import { RollingPlan } from './rolling-view.js';

const byId = (id) => document.getElementById(id);
const PLAY_PAUSE_MS = 150;
const PLANS = { single: SequencePlan, batch: BatchPlan, rolling: RollingPlan };
// What each mode adds to the card's hint.
const MODE_HINTS = {
  single: '',
  batch: 'Two prompts of different lengths in one batch, the shorter left padded: a key padding mask hides the pads and `positions` (Hugging Face\'s position_ids) restarts its rotary positions at 0. Needs Rotary positions under Scores.',
  rolling: 'A cache with rolling: true and the smallest maxLength the window allows (left window + 1): past it, each new key takes the oldest one\'s slot. Needs a Window under Scores.',
};

const chosenMode = () => document.querySelector('input[name="decode-mode"]:checked').value;

export class DecodeView {
  // currentRequest(): the forward request of the settings on screen (throws a readable Error).
  constructor(currentRequest, tooltip) {
    this.currentRequest = currentRequest;
    this.tooltip = tooltip;
    this.result = byId('decode-result'); // machine-readable state, for tests
    this.plan = null; // made at the first step, from the settings and mode then
    this.busy = false;
    this.playing = false;
    byId('decode-step').addEventListener('click', () => this.step());
    byId('decode-play').addEventListener('click', () => (this.playing ? this.pause() : this.play()));
    byId('decode-reset').addEventListener('click', () => this.reset());
    for (const input of document.querySelectorAll('input[name="decode-mode"]')) input.addEventListener('change', () => this.reset());
    this.draw();
  }

  // Starts over: the cache is freed and the maps cleared (also when the settings or mode change).
  reset() {
    this.pause();
    resetDecoder();
    this.plan = null;
    this.error = '';
    this.draw();
  }

  async step() {
    if (this.busy) return false;
    this.busy = true;
    try {
      this.plan ??= new PLANS[chosenMode()](this.currentRequest());
      const { plan } = this;
      const t = plan.times.length;
      if (t >= plan.steps) return false;
      const { token, options } = plan.input(t);
      plan.record(t, await decodeStep(plan.request, token, plan.cacheOptions, options), options);
      this.error = '';
      return t + 1 < plan.steps;
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
    const { plan } = this;
    const times = plan?.times ?? [];
    const steps = times.length;
    const status = byId('decode-status');
    byId('decode-mode-hint').textContent = MODE_HINTS[chosenMode()];
    for (const key of Object.keys(this.result.dataset)) delete this.result.dataset[key];
    Object.assign(this.result.dataset, {
      mode: chosenMode(),
      steps: String(steps),
      timeMs: steps ? String(times[steps - 1]) : '',
      cacheLength: String(plan?.cacheLength ?? 0),
      error: this.error ?? '',
      ...(steps ? plan.state() : {}),
    });
    byId('decode-step').disabled = steps > 0 && steps >= plan.steps;
    for (const id of ['decode-canvas', 'decode-canvas-1', 'decode-caption-0', 'decode-caption-1', 'decode-slots', 'decode-slots-note']) {
      byId(id).hidden = true;
    }
    if (this.error) {
      status.textContent = `Decoding failed: ${this.error}`;
      return;
    }
    if (steps === 0) {
      byId('decode-legend').replaceChildren();
      status.textContent = 'Press Step to feed the first query token.';
      return;
    }
    plan.draw(this.tooltip);
    const sorted = [...times].sort((a, b) => a - b);
    status.textContent = `step ${steps} of ${plan.steps} · this step ${formatTime(times[steps - 1])} · ` +
      `median ${formatTime(sorted[sorted.length >> 1])} · ${plan.summary()}`;
  }
}

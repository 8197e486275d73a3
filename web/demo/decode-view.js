// The decoding mode: runs a plan (one sequence, a batch of two prompts, or a rolling window) one
// step at a time through the engine's KV cache, with Step, Play, Reset, Save and Restore (the cache
// kept in IndexedDB: saved-decoding.js), and shows its maps, the time of every step, and its
// machine-readable state for tests.
import { BatchPlan } from './batch-view.js';
import { formatTime, SequencePlan } from './decode-plan.js';
import { decodeStep, resetDecoder, restoreDecoder, saveDecoder } from './engine.js';
import { RollingPlan } from './rolling-view.js';
import { storeDecoding, storedDecoding } from './saved-decoding.js';

const byId = (id) => document.getElementById(id);
const PLAY_PAUSE_MS = 150;
const PLANS = { single: SequencePlan, batch: BatchPlan, rolling: RollingPlan };
// What each mode adds to the card's hint.
const MODE_HINTS = {
  single: '',
  batch: 'Two prompts of different lengths in one batch, the shorter left padded: a key padding mask hides the pads and `positions` (Hugging Face\'s position_ids) restarts its rotary positions at 0. Choosing it turns Rotary positions on under Scores.',
  rolling: 'A cache with rolling: true and the smallest maxLength the window allows (left window + 1): past it, each new key takes the oldest one\'s slot. Needs a Window under Scores.',
};

const chosenMode = () => document.querySelector('input[name="decode-mode"]:checked').value;

// The batch mode passes `positions`, which only rotary reads: choosing it turns Rotary positions
// on (a change of the settings, which runs the forward again).
function turnOnRotary() {
  const rotary = byId('rotary');
  if (rotary.checked) return;
  rotary.checked = true;
  rotary.dispatchEvent(new Event('change', { bubbles: true }));
}

export class DecodeView {
  // currentRequest(): the forward request of the settings on screen (throws a readable Error).
  constructor(currentRequest, tooltip) {
    this.currentRequest = currentRequest;
    this.tooltip = tooltip;
    this.result = byId('decode-result'); // machine-readable state, for tests
    this.plan = null; // made at the first step, from the settings and mode then
    this.recorded = [];
    this.note = ''; // what Save or Restore did
    this.busy = false;
    this.playing = false;
    byId('decode-step').addEventListener('click', () => this.step());
    byId('decode-play').addEventListener('click', () => (this.playing ? this.pause() : this.play()));
    byId('decode-reset').addEventListener('click', () => this.reset());
    byId('decode-save').addEventListener('click', () => this.exclusive(() => this.save()));
    byId('decode-restore').addEventListener('click', () => this.exclusive(() => this.restore()));
    for (const input of document.querySelectorAll('input[name="decode-mode"]')) {
      input.addEventListener('change', () => {
        if (chosenMode() === 'batch') turnOnRotary();
        this.reset();
      });
    }
    this.draw();
  }

  // Starts over: the cache is freed and the maps cleared (also when the settings or mode change).
  reset() {
    this.pause();
    resetDecoder();
    this.plan = null;
    this.recorded = []; // what each step recorded: [t, its result, its options]
    this.error = '';
    this.note = '';
    this.draw();
  }

  // Runs `action` unless another one runs; a failure is shown as the decoding's error.
  async exclusive(action) {
    if (this.busy) return false;
    this.busy = true;
    try {
      const more = await action();
      this.error = '';
      return more;
    } catch (error) {
      this.error = error.message;
      this.pause();
      return false;
    } finally {
      this.busy = false;
      this.draw();
    }
  }

  step() {
    return this.exclusive(async () => {
      this.plan ??= new PLANS[chosenMode()](this.currentRequest());
      const { plan } = this;
      const t = plan.times.length;
      if (t >= plan.steps) return false;
      const { token, options } = plan.input(t);
      const result = await decodeStep(plan.request, token, plan.cacheOptions, options);
      plan.record(t, result, options);
      this.recorded.push([t, result, options]);
      this.note = '';
      return t + 1 < plan.steps;
    });
  }

  // What a saved decoding must match to be restored: the module, the mode and the sequence.
  keyOf(mode, request) {
    return JSON.stringify([mode, request.modelKey, request.inputs.query.shape]);
  }

  // Keeps the cache (cache.save()) and the steps taken so far in IndexedDB.
  async save() {
    const bytes = await saveDecoder();
    if (!this.plan || bytes === null) throw new Error('Save: take a step first: there is no cache yet');
    await storeDecoding({ key: this.keyOf(chosenMode(), this.plan.request), mode: chosenMode(),
      recorded: this.recorded, bytes });
    this.note = `saved ${this.recorded.length} steps, the cache in ${bytes.length} bytes`;
  }

  // Makes the saved decoding the current one (mha.loadKVCache of its bytes): Step continues it.
  async restore() {
    const saved = await storedDecoding();
    if (!saved) throw new Error('Restore: nothing was saved');
    document.querySelector(`input[name="decode-mode"][value="${saved.mode}"]`).checked = true;
    const plan = new PLANS[saved.mode](this.currentRequest());
    if (this.keyOf(saved.mode, plan.request) !== saved.key) {
      throw new Error('Restore: the saved decoding was made with other settings (module, weights or sequence)');
    }
    this.pause();
    await restoreDecoder(plan.request, saved.bytes);
    for (const [t, result, options] of saved.recorded) plan.record(t, result, options);
    this.plan = plan;
    this.recorded = saved.recorded;
    this.note = `restored ${saved.recorded.length} steps, the cache from ${saved.bytes.length} bytes`;
    return true;
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
      note: this.note ?? '',
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
      `median ${formatTime(sorted[sorted.length >> 1])} · ${plan.summary()}${this.note ? ` · ${this.note}` : ''}`;
  }
}

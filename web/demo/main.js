// The demo page: reads the controls, runs forwards in the package's worker, draws the results.
// Every failure ends as a readable message in the page; the page itself keeps working.
import { DecodeView } from './decode-view.js';
import { engineRunning, listAttentionModules, runRequest, startEngine as loadEngine, stopEngine } from './engine.js';
import { MaskPainter } from './mask-painter.js';
import { buildProblem, MAX_PAINTED_LENGTH } from './problem.js';
import { medianTime, renderResults } from './results-view.js';
import { parseSafetensors } from './safetensors-file.js';
import { readScoreSettings, syncScoreControls } from './score-options.js';
import { describeWeightsFile } from './weights-file.js';

const byId = (id) => document.getElementById(id);
const form = byId('controls');
const result = byId('result'); // machine-readable state of the last run
const tooltip = byId('tooltip');
const MAX_EXPOSED_VALUES = 1 << 18; // larger results are not copied into data attributes
const DEBOUNCE_MS = 180;

const painter = new MaskPainter(byId('mask-canvas'), () => scheduleRun());
let loadedFile = null; // { name, bytes, id, modules }
let fileCount = 0;
let lastRun = null; // { problem, reply }
let running = false;
let runAgain = false;
let debounceTimer = 0;

const numberOf = (id) => (byId(id).value.trim() === '' ? NaN : Number(byId(id).value));
const checkedValue = (name) => form.querySelector(`input[name="${name}"]:checked`).value;
const validLengthInputs = () => [...byId('valid-lengths').querySelectorAll('input')];

function readSettings() {
  const selfAttention = checkedValue('attention') === 'self';
  const queryLength = numberOf('query-length');
  return {
    source: checkedValue('source'),
    seed: numberOf('seed'),
    prefix: byId('prefix').value.trim(),
    useFileInputs: byId('use-file-inputs').checked,
    embedDim: numberOf('embed-dim'),
    numHeads: numberOf('heads'),
    selfAttention,
    queryLength,
    keyLength: selfAttention ? queryLength : numberOf('key-length'),
    batch: numberOf('batch'),
    causal: byId('causal').checked,
    keyPadding: byId('key-padding').checked,
    validLengths: validLengthInputs().map((input) => Number(input.value)),
    customMask: byId('custom-mask').checked,
    maskType: byId('mask-type').value,
    additiveValue: byId('additive-value').value,
    needWeights: byId('need-weights').checked,
    averaged: checkedValue('average') === 'averaged',
    repeats: numberOf('repeats'),
    score: readScoreSettings(),
  };
}

// The loaded file as the current prefix and heads read it; throws a readable Error.
function describeLoadedFile(settings) {
  if (!loadedFile) return null;
  const description = describeWeightsFile(loadedFile.name, loadedFile.bytes, {
    prefix: settings.prefix || null,
    numHeads: settings.numHeads,
    modules: loadedFile.modules,
  });
  return { ...description, id: loadedFile.id };
}

// ---- messages and machine-readable state ----

function showMessage(text, kind = 'error') {
  const box = byId('message');
  box.textContent = text;
  box.className = kind === 'error' ? 'message' : 'message info';
  box.hidden = false;
  if (kind === 'error') result.dataset.error = text;
}

// Fades the last results while the settings on screen did not produce them.
function showStale(stale) {
  document.querySelector('.results').classList.toggle('stale', stale);
}

function clearMessage() {
  byId('message').hidden = true;
  result.dataset.error = '';
}

const exposeTensor = (tensor) =>
  tensor && tensor.data.length <= MAX_EXPOSED_VALUES ? JSON.stringify({ shape: tensor.shape, data: Array.from(tensor.data) }) : '';

// check: the run's check against a fixture or the JS reference (renderResults'), or null.
function recordRun(state, reply, check = null) {
  result.dataset.state = state;
  result.dataset.check = check ? JSON.stringify(check) : '';
  result.dataset.runs = String(Number(result.dataset.runs) + 1);
  result.dataset.output = exposeTensor(reply?.output);
  result.dataset.weights = exposeTensor(reply?.weights);
  result.dataset.timeMs = reply ? String(medianTime(reply)) : '';
}

// ---- controls ----

function setValidLengthInputs(batch, keyLength) {
  const container = byId('valid-lengths');
  const inputs = validLengthInputs();
  for (let n = inputs.length; n < batch; n++) {
    const label = document.createElement('label');
    label.innerHTML = `item ${n} <input type="number" min="0" step="1" value="${Math.max(1, keyLength - 3 * n)}">`;
    container.append(label);
  }
  inputs.slice(batch).forEach((input) => input.parentElement.remove());
  for (const input of validLengthInputs()) {
    input.max = String(keyLength);
    if (Number(input.value) > keyLength) input.value = String(keyLength);
  }
}

function setBatchItems(batch) {
  const select = byId('batch-item');
  const selected = Math.min(Number(select.value) || 0, batch - 1);
  select.replaceChildren(...Array.from({ length: batch }, (_, n) => new Option(String(n), String(n))));
  select.value = String(selected);
  byId('batch-item-row').hidden = batch < 2;
}

// Shows the controls that apply, and mirrors a file's fixed settings into them.
function syncControls() {
  const settings = readSettings();
  for (const element of form.querySelectorAll('[data-for-source]')) {
    element.hidden = !element.dataset.forSource.split(' ').includes(settings.source);
  }
  let file = null;
  if (settings.source === 'file') {
    try {
      file = describeLoadedFile(settings);
    } catch {
      // reported when the run is built
    }
  }
  const fixtureLocked = Boolean(file?.fixture && settings.useFileInputs);
  byId('use-file-inputs-row').hidden = !file?.fixture;
  byId('embed-dim').disabled = Boolean(file);
  if (file) byId('embed-dim').value = String(file.config.embedDim);
  const needsCross = Boolean(file?.config.kdim || file?.config.vdim);
  form.querySelector('input[name="attention"][value="self"]').disabled = needsCross;
  if (needsCross) form.querySelector('input[name="attention"][value="cross"]').checked = true;
  for (const name of ['shape', 'masks', 'score', 'outputs']) form.querySelector(`[data-${name}]`).disabled = fixtureLocked;
  const listed = file && !file.fixture && loadedFile.modules.find((m) => m.prefix === file.prefix);
  syncScoreControls(readScoreSettings(), listed ? Boolean(listed.sinks) : null);
  if (fixtureLocked) showFixtureSettings(file);

  const current = readSettings();
  byId('key-length').disabled = fixtureLocked || current.selfAttention;
  if (current.selfAttention) byId('key-length').value = String(current.queryLength);
  byId('valid-lengths').hidden = !current.keyPadding || fixtureLocked;
  if (Number.isInteger(current.batch) && current.batch > 0 && current.batch <= 64 && Number.isInteger(current.keyLength)) {
    setValidLengthInputs(current.batch, current.keyLength);
  }
  byId('custom-mask-options').hidden = !current.customMask;
  byId('additive-value-row').hidden = current.maskType !== 'additive';
  for (const input of form.querySelectorAll('input[name="average"]')) input.disabled = !current.needWeights;
  byId('mask-card').hidden = !current.customMask || fixtureLocked;
  const paintable = [current.queryLength, current.keyLength].every((n) => n > 0 && n <= MAX_PAINTED_LENGTH);
  if (!byId('mask-card').hidden && paintable) {
    painter.resize(current.queryLength, current.keyLength);
    syncPainterContext(current);
  }
}

function showFixtureSettings(file) {
  const { config, fixture } = file;
  const { query, key } = fixture.inputs;
  const first = config.batchFirst && query.shape.length === 3;
  byId('heads').value = String(config.numHeads);
  byId('query-length').value = String(query.shape[first ? 1 : 0]);
  byId('key-length').value = String(key.shape[first ? 1 : 0]);
  byId('batch').value = String(query.shape.length === 3 ? query.shape[first ? 0 : 1] : 1);
  byId('causal').checked = fixture.options.isCausal;
  byId('key-padding').checked = Boolean(fixture.options.keyPaddingMask);
  byId('custom-mask').checked = Boolean(fixture.options.attnMask);
  byId('need-weights').checked = fixture.options.needWeights;
  form.querySelector(`input[name="average"][value="${fixture.options.averageAttnWeights ? 'averaged' : 'per-head'}"]`).checked = true;
}

function syncPainterContext(settings) {
  const n = Number(byId('batch-item').value) || 0;
  const valid = settings.validLengths[n] ?? settings.keyLength;
  painter.setContext((r, c) => (settings.causal && c > r) || (settings.keyPadding && c >= valid));
}

// ---- engine and runs ----

function showEngineBadges(info, isolated) {
  const build = byId('badge-build');
  build.textContent = `build: ${info.build}${info.target ? ` (${info.target})` : ''}`;
  build.className = `badge ${info.build.endsWith('-threaded') ? 'good' : 'warn'}`;
  byId('badge-threads').textContent = `${info.threads} thread${info.threads === 1 ? '' : 's'}`;
  const badge = byId('badge-isolated');
  badge.textContent = isolated ? 'cross-origin isolated' : 'not cross-origin isolated';
  badge.className = `badge ${isolated ? 'good' : 'warn'}`;
  Object.assign(result.dataset, { build: info.build, threads: String(info.threads), isolated: String(isolated) });
  showThreadsAllowed(info);
}

// The slider as the library allows: an isolated page may still have no threads (WebKitGTK, say,
// has no SharedArrayBuffer); lib.info says so and why.
function showThreadsAllowed(info) {
  const slider = byId('threads');
  const off = info.threadsOffReason !== null;
  slider.disabled = off;
  if (off) {
    slider.value = '1';
    byId('threads-value').textContent = '1';
  }
  byId('threads-hint').textContent = off
    ? `Threads are off here: ${info.threadsOffReason}, so the single-thread SIMD build runs.` +
      (self.crossOriginIsolated ? '' : ' Threads need a cross-origin isolated page (COOP/COEP headers).')
    : '';
}

// The request of the settings on screen, for the decoding mode; throws a readable Error.
function currentRequest() {
  const settings = readSettings();
  if (settings.source === 'file' && !loadedFile) throw new Error('choose a .safetensors file first');
  const file = settings.source === 'file' ? describeLoadedFile(settings) : null;
  return buildProblem(settings, file, painter.cells).request;
}
const decodeView = new DecodeView(currentRequest, tooltip);

async function startEngine() {
  decodeView.reset();
  const threads = byId('threads').disabled ? 1 : Number(byId('threads').value);
  byId('badge-build').textContent = 'loading engine…';
  byId('badge-build').className = 'badge';
  result.dataset.state = 'loading';
  try {
    showEngineBadges(await loadEngine(threads), self.crossOriginIsolated === true);
    result.dataset.state = 'ready';
  } catch (error) {
    byId('badge-build').textContent = 'engine failed to load';
    showMessage(`The engine could not start: ${error.message}\n(If dist/ has no WASM build yet, run \`npm run build\`; \`npm start\` does it for you.)`);
    result.dataset.state = 'error';
  }
}

function scheduleRun(delay = DEBOUNCE_MS) {
  result.dataset.state = 'pending';
  clearTimeout(debounceTimer);
  debounceTimer = setTimeout(runNow, delay);
}

async function runNow() {
  clearTimeout(debounceTimer);
  if (running) {
    runAgain = true;
    return;
  }
  running = true;
  try {
    if (!engineRunning()) await startEngine();
    if (!engineRunning()) {
      recordRun('error', null); // startEngine has said why
      return;
    }
    const settings = readSettings();
    if (settings.source === 'file' && !loadedFile) {
      showMessage('Choose a .safetensors file above, or drop one anywhere on the page.', 'info');
      recordRun('waiting', null);
      return;
    }
    const problem = buildProblem(settings, settings.source === 'file' ? describeLoadedFile(settings) : null, painter.cells);
    result.dataset.state = 'running';
    byId('stat-time-note').textContent = 'running…';
    byId('stop').hidden = false;
    const reply = await runRequest(problem.request);
    lastRun = { problem, reply };
    setBatchItems(problem.view.batch);
    const check = renderResults(problem, reply, Number(byId('batch-item').value), tooltip);
    clearMessage();
    showStale(false);
    recordRun('done', reply, check);
  } catch (error) {
    showMessage(error.message);
    showStale(true);
    byId('stat-time-note').textContent = 'failed';
    recordRun('error', null);
  } finally {
    byId('stop').hidden = true;
    running = false;
    if (runAgain) {
      runAgain = false;
      runNow();
    }
  }
}

// ---- files ----

// What the file-info line says about a loaded file.
function describeFileContents(name, description, modules) {
  if (description.fixture) return `${name}: a test fixture with its config, inputs, masks and PyTorch's expected output.`;
  const layouts = [...new Set(modules.map((m) => m.layout))].join(', ');
  return `${name}: ${modules.length} attention module${modules.length > 1 ? 's' : ''} (${layouts}); pick one under Prefix and set Heads to the model's num_attention_heads (a file does not say).`;
}

async function loadFile(file) {
  try {
    const bytes = new Uint8Array(await file.arrayBuffer());
    parseSafetensors(bytes); // a readable error for what is not a .safetensors file
    if (!engineRunning()) await startEngine();
    // The engine reads the headers: which attention modules the file holds, in which layout.
    const modules = await listAttentionModules(bytes);
    const description = describeWeightsFile(file.name, bytes, { prefix: null, numHeads: numberOf('heads') || 1, modules });
    loadedFile = { name: file.name, bytes, id: ++fileCount, modules };
    decodeView.reset();
    form.querySelector('input[name="source"][value="file"]').checked = true;
    byId('prefix').value = description.prefix;
    byId('prefixes').replaceChildren(...description.prefixes.map((m) =>
      new Option(m.embedDim ? `${m.layout}, embed ${m.embedDim}` : m.layout, m.prefix)));
    byId('file-info').textContent = describeFileContents(file.name, description, modules);
    syncControls();
    scheduleRun(0);
  } catch (error) {
    showMessage(`Could not use ${file.name}: ${error.message}`);
    recordRun('error', null);
  }
}

function watchDragAndDrop() {
  const overlay = byId('drop-overlay');
  const hasFiles = (event) => event.dataTransfer?.types.includes('Files');
  window.addEventListener('dragover', (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    overlay.hidden = false;
  });
  window.addEventListener('dragleave', (event) => {
    if (!event.relatedTarget) overlay.hidden = true;
  });
  window.addEventListener('drop', (event) => {
    if (!hasFiles(event)) return;
    event.preventDefault();
    overlay.hidden = true;
    if (event.dataTransfer.files.length > 0) loadFile(event.dataTransfer.files[0]);
  });
}

// ---- wiring ----

function setUpThreads() {
  const slider = byId('threads');
  const cores = navigator.hardwareConcurrency || 1;
  // ?threads=N picks the starting count (clamped to the cores there are), e.g. for shared links.
  const requested = Number(new URLSearchParams(location.search).get('threads'));
  slider.max = String(cores);
  slider.value = String(Number.isInteger(requested) && requested >= 1 ? Math.min(requested, cores) : cores);
  byId('threads-value').textContent = slider.value;
  slider.addEventListener('input', () => {
    byId('threads-value').textContent = slider.value;
  });
  slider.addEventListener('change', async () => {
    await startEngine();
    scheduleRun(0);
  });
}

function onControlChange(event) {
  if (event.target.id === 'threads' || event.target.id === 'weights-file') return;
  if (event.target.id === 'prefix' && event.type === 'input') return; // wait for the whole prefix
  decodeView.reset();
  syncControls();
  scheduleRun();
}

form.addEventListener('input', onControlChange);
form.addEventListener('change', onControlChange);
form.addEventListener('submit', (event) => {
  event.preventDefault();
  runNow();
});
byId('weights-file').addEventListener('change', (event) => {
  const [file] = event.target.files;
  event.target.value = ''; // choosing the same file again reloads it
  if (file) loadFile(file);
});
byId('mask-clear').addEventListener('click', () => painter.clear());
// A forward cannot be interrupted inside WASM: stopping ends the worker; the next run starts a new one.
// Stop also drops the run queued behind the stopped one (Run pressed or a setting changed meanwhile),
// which would otherwise start the same long forward again.
byId('stop').addEventListener('click', () => {
  runAgain = false;
  clearTimeout(debounceTimer);
  stopEngine();
  decodeView.reset();
});
byId('batch-item').addEventListener('change', () => {
  if (lastRun) renderResults(lastRun.problem, lastRun.reply, Number(byId('batch-item').value), tooltip);
  syncPainterContext(readSettings());
});
window.addEventListener('unhandledrejection', (event) => showMessage(`Unexpected error: ${event.reason?.message ?? event.reason}`));
window.addEventListener('error', (event) => showMessage(`Unexpected error: ${event.message}`));

watchDragAndDrop();
setUpThreads();
syncControls();
await startEngine();
runNow();

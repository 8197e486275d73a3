// One page row of bench/run.mjs in this page (cross-origin isolated, served
// by bench/browser/child.mjs in Chromium, Firefox or WebKit): a W row (one
// forward) or a D row (one decoding step against a KV cache).
// window.prepareRow fetches the inputs and the model and loads the engine
// from the page's main thread as a page would: mha-wasm with loadMHA (its
// proxy 'auto' runs the engine in the package's own worker), onnxruntime-web
// with its defaults (on the main thread; env.wasm.proxy = true, its worker,
// was no faster on W1-W3 in Chromium). window.measureRow runs the timing
// rule of bench/lib/timing.mjs and resolves to { medianMs, reps, info?,
// timerTickMs, output (base64 of the float32 output bytes) }.
import { decodeInputsFrom, isDecode } from '/bench/lib/decode.mjs';
import { inputsFrom } from '/bench/lib/inputs.mjs';
import { measure, measurePair } from '/bench/lib/timing.mjs';
import { decodeConfig, decodeFeeds, prepareDecode } from '/bench/engines/decode_step.mjs';
import {
  createMhaModule, loadMhaThreads, mhaForward, ortFeed, ortSession, ortWebOptions,
} from '/bench/engines/forward.mjs';

const ORT_WEB_DIST = '/node_modules/onnxruntime-web/dist/';

async function bytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

// name -> ({ threads, w, base?, inputs, files }) => { info?, run, beforeRun?, base? }, the
// same calls as the Node engines (bench/engines/mha_wasm.mjs, onnxruntime.mjs). base: the
// float32 row a D row of another precision is timed in alternation with (issue 24), a
// second module of the same loaded package (the same proxy worker and threads).
const ENGINES = {
  async 'mha-wasm'({ threads, w, base, inputs, files }) {
    const { loadMHA } = await import('/web/src/browser.js');
    const lib = await loadMhaThreads(loadMHA, threads);
    const safetensors = await bytes(files.safetensors);
    if (!isDecode(w)) return { info: lib.info, ...mhaForward(await createMhaModule(lib, w, safetensors), w, inputs) };
    const step = async (row) => prepareDecode(lib, await createMhaModule(lib, row, safetensors, decodeConfig(row)),
      row, inputs);
    return { info: lib.info, ...await step(w), ...(base ? { base: await step(base) } : {}) };
  },
  async 'onnxruntime-web'({ threads, w, inputs, files }) {
    const ort = await import(`${ORT_WEB_DIST}ort.wasm.min.mjs`);
    const options = ortWebOptions(ort, threads, ORT_WEB_DIST);
    const feed = isDecode(w) ? decodeFeeds(ort, w, inputs) : ortFeed(ort, w, inputs);
    return ortSession(ort, await bytes(files.onnx), options, feed);
  },
};

function base64(floats) {
  const data = new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
  let text = '';
  for (let i = 0; i < data.length; i += 0x8000) text += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(text);
}

let prepared;

// Loads the engine and the workload: request = { engine, threads, w, base?, files },
// files = { data: URL prefix of build/bench/data/<id>., safetensors, onnx: model URLs }.
window.prepareRow = async ({ engine, threads, w, base, files }) => {
  if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated');
  const read = (name) => bytes(`${files.data}${name}`);
  const inputs = await (isDecode(w) ? decodeInputsFrom(w, read) : inputsFrom(w, read));
  prepared = await ENGINES[engine]({ threads, w, base, inputs, files });
};

// A fresh Chromium takes longer than Node to reach its steady speed: W3 and
// W4 at 2 threads ran about twice as slow for their first 0.6 s (15 to 60
// forwards; Node 20: its first 6), so the timing rule's warm-up (5 runs of a
// short forward) left the timed runs inside that span. The page first runs
// for the rule's warmupMs, whatever the number of runs.
async function settle(run, beforeRun, ms) {
  for (const start = performance.now(); performance.now() - start < ms;) {
    await beforeRun?.();
    await run();
  }
}

// The smallest step of performance.now() here (browsers coarsen it), in ms.
function timerTick() {
  let tick = Infinity;
  for (let i = 0, last = performance.now(); i < 100_000; i++) {
    const now = performance.now();
    if (now > last) [tick, last] = [Math.min(tick, now - last), now];
  }
  return tick;
}

// One untimed run (its output is returned), a warmupMs of runs, then the
// timing rule (`timing`: workloads.json's "timing" or "decodeTiming"); with a
// base, the two in alternation (measurePair: baseMedianMs, pairRatio).
window.measureRow = async (timing) => {
  const { info, run, beforeRun, base } = prepared;
  await beforeRun?.();
  const output = await run();
  await settle(run, beforeRun, timing.warmupMs);
  const timed = await (base ? measurePair(base.run, run, timing, { a: base.beforeRun, b: beforeRun })
    : measure(run, timing, beforeRun));
  return { ...timed, ...(info ? { info } : {}), timerTickMs: timerTick(), output: base64(output) };
};
document.title = 'ready';

// One W row of bench/run.mjs in this page (cross-origin isolated, served by
// bench/chromium/child.mjs). window.prepareForward fetches the inputs and
// the model and loads the engine from the page's main thread as a page
// would: mha-wasm with loadMHA (its proxy 'auto' runs the engine in the
// package's own worker), onnxruntime-web with its defaults (on the main
// thread; env.wasm.proxy = true, its worker, was no faster on W1-W3).
// window.measureForward runs the timing rule of bench/lib/timing.mjs and
// resolves to { medianMs, reps, info?, browser, output (base64 of the
// float32 output bytes) }.
import { inputsFrom } from '/bench/lib/inputs.mjs';
import { measure } from '/bench/lib/timing.mjs';
import {
  createMhaModule, loadMhaThreads, mhaForward, ortFeed, ortSession, ortWebOptions,
} from '/bench/engines/forward.mjs';

const ORT_WEB_DIST = '/node_modules/onnxruntime-web/dist/';

async function bytes(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

// name -> ({ threads, w, inputs, files }) => { info?, run }.
const ENGINES = {
  async 'mha-wasm'({ threads, w, inputs, files }) {
    const { loadMHA } = await import('/web/src/browser.js');
    const lib = await loadMhaThreads(loadMHA, threads);
    const mha = await createMhaModule(lib, w, await bytes(files.safetensors));
    return { info: lib.info, ...mhaForward(mha, w, inputs) };
  },
  async 'onnxruntime-web'({ threads, w, inputs, files }) {
    const ort = await import(`${ORT_WEB_DIST}ort.wasm.min.mjs`);
    const options = ortWebOptions(ort, threads, ORT_WEB_DIST);
    return ortSession(ort, await bytes(files.onnx), options, ortFeed(ort, w, inputs));
  },
};

function base64(floats) {
  const data = new Uint8Array(floats.buffer, floats.byteOffset, floats.byteLength);
  let text = '';
  for (let i = 0; i < data.length; i += 0x8000) text += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(text);
}

async function browserVersion() {
  const brands = (await navigator.userAgentData?.getHighEntropyValues(['fullVersionList']))?.fullVersionList;
  const chromium = brands?.find(({ brand }) => brand === 'Chromium');
  return chromium ? `Chromium ${chromium.version}` : navigator.userAgent;
}

let prepared;

// Loads the engine and the workload: request = { engine, threads, w, files },
// files = { data: URL prefix of build/bench/data/<id>., safetensors, onnx: model URLs }.
window.prepareForward = async ({ engine, threads, w, files }) => {
  if (!crossOriginIsolated) throw new Error('the page is not cross-origin isolated');
  const inputs = await inputsFrom(w, (name) => bytes(`${files.data}${name}`));
  prepared = await ENGINES[engine]({ threads, w, inputs, files });
};

// A fresh Chromium takes longer than Node to reach its steady speed: W3 and
// W4 at 2 threads ran about twice as slow for their first 0.6 s (15 to 60
// forwards; Node 20: its first 6), so the timing rule's warm-up (5 runs of a
// short forward) left the timed runs inside that span. The page first runs
// forwards for the rule's warmupMs, whatever their number.
async function settle(run, ms) {
  for (const start = performance.now(); performance.now() - start < ms;) await run();
}

// One untimed forward (its output is returned), a warmupMs of forwards, then
// the timing rule.
window.measureForward = async (timing) => {
  const { info, run } = prepared;
  const output = await run();
  await settle(run, timing.warmupMs);
  const timed = await measure(run, timing);
  return { ...timed, ...(info ? { info } : {}), browser: await browserVersion(), output: base64(output) };
};
document.title = 'ready';

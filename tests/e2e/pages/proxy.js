// The proxy under test (tests/e2e/proxy.test.mjs drives it through window.proxyTest): the
// hostile-input table run on the page's main thread against a library in the package's Worker,
// and the calls the test needs around it. Results go back as plain arrays.
import { MHAError, loadMHA } from '/web/src/browser.js';
import { fixtureFromBytes, moduleConfig } from '/tests/js/helpers/fixture_data.js';
import { HOSTILE_FIXTURE, hostileTable } from '/tests/js/helpers/hostile_table.js';
import {
  layoutFixtureFromShards, layoutModuleConfig, runLayoutForward, weightOptions,
} from '/tests/js/helpers/layout_fixture_data.js';
import { runDecoding } from '/tests/js/helpers/decoding_run.js';

const response = await fetch(`/tests/fixtures/${HOSTILE_FIXTURE}`);
const fixture = fixtureFromBytes(HOSTILE_FIXTURE, new Uint8Array(await response.arrayBuffer()));
const table = hostileTable(fixture);
const input = (name) => fixture.tensors[`input.${name}`];
const [query, key, value, keyPaddingMask] = ['query', 'key', 'value', 'key_padding_mask'].map(input);

const lib = await loadMHA({ proxy: true });
const ctx = { lib, mha: await loadedModule() };

async function loadedModule() {
  const mha = lib.createMultiheadAttention(moduleConfig(fixture.config));
  await mha.loadSafetensors(fixture.bytes, { prefix: 'param.' });
  return mha;
}

const plainTensor = (t) => t && { data: Array.from(t.data), shape: t.shape };
const plain = (result) => result && { output: plainTensor(result.output), weights: plainTensor(result.weights) };
const forward = (mha) => mha.forward(query, key, value, { keyPaddingMask });
const errorOf = (error) => ({ isMHAError: error instanceof MHAError, name: error?.name, message: error?.message });

// A random input of (L, N, E) for the fixture's module.
function randomInput(L, N = 1) {
  const data = new Float32Array(L * N * query.shape[2]);
  for (let i = 0; i < data.length; i++) data[i] = Math.sin(i * 0.731);
  return { data, shape: [L, N, query.shape[2]] };
}

// How a call went: { threw } (synchronously), else how its Promise settled.
async function outcomeOf(call) {
  let pending;
  try {
    pending = call();
  } catch (error) {
    return { threw: true, ...errorOf(error) };
  }
  return pending.then(() => ({ threw: false, resolved: true }), (error) => ({ threw: false, ...errorOf(error) }));
}

// The last messages posted to the library's current worker, by id: what each was (a method, a
// load's step, a release), so that a stall says what the worker has not answered.
const posted = new Map();
function watchPosts() {
  const { worker } = lib.connection;
  worker.postMessage = function watched(message, transfer) {
    posted.set(message.id, message.op === 'release' ? 'release' : `${message.method} ${message.args?.[0] ?? ''}`);
    if (posted.size > 64) posted.delete(posted.keys().next().value);
    return Worker.prototype.postMessage.call(this, message, transfer);
  };
}

// Where a stalled call is: the calls the worker has not answered, each as posted (or not posted:
// waiting behind a call that holds the channel), and whether one holds it.
function pendingCalls() {
  const { pending, holder, waiting } = lib.connection;
  return `pending ${[...pending.keys()].map((id) => `${id} (${posted.get(id) ?? 'not posted'})`).join(', ')}; ` +
    `channel ${holder ? 'held' : 'free'}, ${waiting.length} waiting`;
}

window.proxyTest = {
  info: lib.info,
  rows: { errors: table.errors.length, results: table.results.length },

  // Error row i: how the call failed (or that it did not), then a valid forward on the same module.
  async errorRow(i) {
    let outcome = { resolved: true };
    try {
      await table.errors[i][1](ctx);
    } catch (error) {
      outcome = errorOf(error);
    }
    return { ...outcome, valid: plain(await forward(ctx.mha)) };
  },

  async resultRow(i) {
    const result = plain(await table.results[i][1](ctx));
    return { result, valid: plain(await forward(ctx.mha)) };
  },

  // A forward of a few hundred ms started, then `stop` (a function of the page) run while it is
  // pending (stopName: a method of proxyTest); then a new module in the (new) worker.
  async stoppedMidCall(stopName) {
    const mha = await loadedModule();
    // Long enough (about a second) to be still running when the worker is stopped 30 ms in.
    const long = randomInput(20000);
    const pending = mha.forward(long, long, long, { needWeights: false });
    await new Promise((resolve) => setTimeout(resolve, 30));
    window.proxyTest[stopName]();
    const stopped = await pending.then(() => ({ resolved: true }), errorOf);
    const later = await mha.forward(query, key, value).then(() => ({ resolved: true }), errorOf);
    ctx.mha = await loadedModule();
    return { stopped, later, again: plain(await forward(ctx.mha)) };
  },

  // lib.info of a library loaded with the default options inside a Worker of the page's own.
  async infoInAWorker() {
    const worker = new Worker('./in_worker.js', { type: 'module' });
    const { data } = await new Promise((resolve) => { worker.onmessage = resolve; });
    worker.terminate();
    return data;
  },

  // A weight-layout fixture in two shards: the modules listed, the output of the module loaded
  // with its { prefix, layout, names }, and the error an empty shard list rejects with.
  async shardedLayout(name) {
    const shards = await Promise.all([1, 2].map(async (i) => new Uint8Array(await (await fetch(
      `/tests/fixtures/layouts/${name}-0000${i}-of-00002.safetensors`)).arrayBuffer())));
    const layout = layoutFixtureFromShards(name, shards);
    const modules = await lib.listAttentionModules(shards);
    const mha = lib.createMultiheadAttention(layoutModuleConfig(layout.config));
    await mha.loadSafetensors(shards, weightOptions(layout));
    const { output } = await runLayoutForward(mha, layout);
    mha.dispose();
    let empty = { resolved: true };
    try {
      await lib.listAttentionModules([]);
    } catch (error) {
      empty = errorOf(error);
    }
    return { modules, output: plainTensor(output), empty };
  },

  terminateByApi() {
    lib.terminate();
  },

  // Terminates the proxy's Worker from outside, as a crash would.
  terminateFromOutside() {
    for (const worker of window.createdWorkers.splice(0)) worker.terminate();
  },

  // A library of its own (other options than `lib`'s): loaded once for two calls, its worker
  // ended by dispose(), its calls then rejected; loadMHA() then loads afresh. The same files
  // named by wasmPaths: options that differ where threads resolve to lib's 1 too (WebKitGTK has
  // no SharedArrayBuffer), as loadMHA keys its libraries on resolved options.
  async disposedLibrary() {
    const options = { proxy: true, threads: 1, wasmPaths: '/dist/' };
    const [one, same] = await Promise.all([loadMHA(options), loadMHA(options)]);
    const terminate = Worker.prototype.terminate;
    let ended = 0;
    Worker.prototype.terminate = function () { ended++; return terminate.call(this); };
    try {
      one.dispose();
    } finally {
      Worker.prototype.terminate = terminate;
    }
    const later = await outcomeOf(() => one.heapInfo());
    const again = await loadMHA(options);
    const works = (await again.heapInfo()).inUseBytes > 0;
    again.dispose();
    return { loadedOnce: one === same, ended, later, fresh: again !== one, works };
  },

  // Forwards pending when dispose() is called: their results, then what a later call does.
  async disposeWithCallsPending() {
    const mha = await loadedModule();
    const pending = [forward(mha), forward(mha), forward(mha)];
    mha.dispose();
    const later = await outcomeOf(() => mha.forward(query, key, value));
    return { results: (await Promise.all(pending)).map(plain), later };
  },

  // Makes `count` modules (loaded, so they hold memory in the worker) and drops them undisposed;
  // resolves to the worker's bytes in use with them.
  async forgetModules(count) {
    for (let i = 0; i < count; i++) await loadedModule();
    return (await lib.heapInfo()).inUseBytes;
  },

  async inUseBytes() {
    await new Promise((resolve) => setTimeout(resolve, 50));   // finalizers run as tasks
    return (await lib.heapInfo()).inUseBytes;
  },

  // A decoding fixture's schedule (path under tests/fixtures) on a KV cache
  // that lives in the worker.
  async decode(path) {
    const bytes = new Uint8Array(await (await fetch(`/tests/fixtures/${path}`)).arrayBuffer());
    const results = await runDecoding(lib, fixtureFromBytes(path.split('/').pop(), bytes));
    return results.map((r) => ({ ...plain(r), length: r.length, held: r.held }));
  },

  // cache.reorder in the worker: the array's type and length (checked on the page) and an index
  // out of range reject; a prefill, a reorder copying entry 1 into entry 0 and a step, sent without
  // waiting: the step's two rows (the same token) then differ by `rowDifference`.
  async reorder() {
    const cache = ctx.mha.createKVCache({ batchSize: 2, maxLength: 8 });
    const wrongType = await outcomeOf(() => cache.reorder([1, 1]));
    const wrongLength = await outcomeOf(() => cache.reorder(new Int32Array(3)));
    const outOfRange = await outcomeOf(() => cache.reorder(Int32Array.of(0, 2)));
    const prompt = randomInput(3, 2);
    const token = randomInput(1, 2);
    token.data.copyWithin(token.data.length / 2, 0, token.data.length / 2);
    const [, reordered, { output }] = await Promise.all([
      ctx.mha.forward(prompt, prompt, prompt, { cache, isCausal: true, needWeights: false }),
      cache.reorder(Int32Array.of(1, 1)),
      ctx.mha.forward(token, token, token, { cache, needWeights: false }),
    ]);
    const half = output.data.length / 2;
    const rowDifference = Math.max(...output.data.slice(0, half).map((v, i) => Math.abs(v - output.data[half + i])));
    const length = cache.length;
    cache.dispose();
    const disposed = await outcomeOf(() => cache.reorder(Int32Array.of(0, 1)));
    return { wrongType, wrongLength, outOfRange, reordered: reordered ?? null, rowDifference, length, disposed };
  },

  // Forwards sent together, each input overwritten (NaN) as soon as its call is sent, then one
  // more after they are answered: the largest difference from the same inputs forwarded one at a
  // time (the inputs cross by copy, and a staging buffer is reused only after its call).
  async changedAfterSend() {
    const inputs = [3, 40, 7, 25].map((L) => randomInput(L));
    const expected = [];
    for (const x of inputs) expected.push((await ctx.mha.forward(x, x, x)).output.data);
    const sent = inputs.map((x) => ({ data: x.data.slice(), shape: x.shape }));
    const send = (x) => {
      const pending = ctx.mha.forward(x, x, x);
      x.data.fill(NaN);
      return pending;
    };
    const results = await Promise.all(sent.slice(0, 3).map(send));
    results.push(await send(sent[3]));
    return Math.max(...results.map(({ output }, i) =>
      Math.max(...output.data.map((v, j) => Math.abs(v - expected[i][j])))));
  },

  // The proxy's calls one after another, `rounds` times a module created, loaded, run forward and
  // disposed; a call that has not settled after `stallMs` ends the loop. Resolves to
  // { calls, ms, stalled: null | what never settled }.
  async stress(rounds, stallMs) {
    watchPosts();
    let calls = 0;
    const start = performance.now();
    const settled = (what, promise) => new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`stalled: ${what} (call ${calls + 1}) did not settle in ${stallMs} ms; ${pendingCalls()}`)), stallMs);
      promise.then((value) => { clearTimeout(timer); calls++; resolve(value); }, (error) => { clearTimeout(timer); reject(error); });
    });
    try {
      for (let i = 0; i < rounds; i++) {
        const mha = lib.createMultiheadAttention(moduleConfig(fixture.config));
        calls++;
        await settled('loadSafetensors', mha.loadSafetensors(fixture.bytes, { prefix: 'param.' }));
        const result = await settled('forward', forward(mha));
        if (!(result.output.data.length > 0)) throw new Error(`round ${i}: an empty output`);
        await settled('dispose', Promise.resolve(mha.dispose()));
      }
    } catch (error) {
      return { calls, ms: performance.now() - start, stalled: error.message };
    }
    return { calls, ms: performance.now() - start, stalled: null };
  },

  // `calls` forwards, a module made and disposed every 10th; the worker's heap after.
  async manyCalls(calls) {
    for (let i = 0; i < calls; i++) {
      if (i % 10 === 0) (await loadedModule()).dispose();
      await forward(ctx.mha);
    }
    return lib.heapInfo();
  },
};
document.title = 'ready';

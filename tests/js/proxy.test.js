// The proxy (web/src/proxy_client.js and proxy_worker.js, the code a page runs) in Node, as
// loadMHA({ proxy: true }) runs it there: the client on this thread, its worker in a worker thread
// (proxy_worker_node.js), here as on a cross-origin isolated page (arrays staged in shared
// memory). What it sends and what it answers, against the same calls in the calling thread; its
// races, with delays injected; a timer that runs during a long forward.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import * as nodeEnv from '../../web/src/env_node.js';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { startProxy } from '../../web/src/proxy_client.js';
import { STEP, errorFields, errorFrom } from '../../web/src/proxy_table.js';
import { lcg } from './helpers/random.js';
import { writeSafetensors } from './helpers/safetensors.js';

globalThis.crossOriginIsolated = true;

// The bytes of typed arrays each message to the worker carried.
const sent = [];
const bytesOf = (message) => (message.staged ? message.staged.views.reduce((sum, [type, , length]) =>
  sum + length * globalThis[type].BYTES_PER_ELEMENT, 0) : 0) +
  (message.arrays ?? []).reduce((sum, array) => sum + array.byteLength, 0);

const inThread = await loadMHA();

// Runs `deliver`s one after another, each 0-2 ms after the last (`random`), or at once.
function inOrder(random) {
  if (random === null) return (deliver) => deliver();
  let last = Promise.resolve();
  return (deliver) => {
    last = last.then(() => new Promise((resolve) => setTimeout(resolve, 2 * random()))).then(deliver);
  };
}

// Node's worker (env_node.js's) as the client sees it, watched: what each message to it carries
// (`sent`) and, with a `seed`, delays: each message, both ways, arrives 0-2 ms late at random (in
// the order sent, as postMessage keeps it), so that each side runs on meanwhile.
class Watched {
  constructor(worker, seed) {
    this.worker = worker;
    this.toWorker = inOrder(seed === null ? null : lcg(seed));
    const toClient = inOrder(seed === null ? null : lcg(seed + 1));
    for (const handler of ['onmessage', 'onerror', 'onmessageerror']) {
      worker[handler] = (event) => toClient(() => this[handler](event));
    }
  }

  postMessage(message, transfer = []) {
    sent.push({ method: message.method, step: message.args?.[0], bytes: bytesOf(message),
      transferred: transfer.reduce((sum, buffer) => sum + buffer.byteLength, 0) });
    // Cloned now, as postMessage does (it throws here for what cannot be cloned).
    const copy = structuredClone(message, { transfer });
    this.toWorker(() => this.worker.postMessage(copy, transfer));
  }

  terminate() {
    this.worker.terminate();
  }
}

// Node's environment with the worker watched; with a `seed`, delays injected both ways and in the
// worker thread, which then runs helpers/proxy_slow_worker.js (it sleeps 0-2 ms at random before
// it takes each message).
const SLOW_WORKER = new URL('./helpers/proxy_slow_worker.js', import.meta.url).href;
const watchedEnv = (seed = null) => ({
  ...nodeEnv,
  startWorker: (script) =>
    new Watched(nodeEnv.startWorker(seed === null ? script : { ...script, url: SLOW_WORKER }), seed),
});

const E = 16;
const CONFIG = { embedDim: E, numHeads: 2 };
const filled = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed));
const WEIGHTS = {
  in_proj_weight: filled(3 * E * E, 1), in_proj_bias: filled(3 * E, 2),
  'out_proj.weight': filled(E * E, 3), 'out_proj.bias': filled(E, 4),
};
const under = (prefix) => Object.fromEntries(Object.entries(WEIGHTS).map(([key, value]) => [prefix + key, value]));
const QUERY = { data: filled(3 * E, 5), shape: [3, 1, E] };

const FILES = nodeEnv.proxyFiles();
const proxied = await startProxy({}, FILES, watchedEnv());
after(() => proxied.terminate());

async function outcome(promise) {
  try {
    return { value: await promise };
  } catch (error) {
    return { error: { type: error.constructor.name, name: error.name, message: error.message } };
  }
}

test('call ids past 2^31 settle: 40 calls from 2^31 - 20', async () => {
  proxied.connection.nextId = 2 ** 31 - 20;
  const infos = await Promise.all(Array.from({ length: 40 }, () => proxied.heapInfo()));
  assert.equal(infos.length, 40);
  assert.ok(proxied.connection.nextId > 2 ** 31 + 19);
});

test('a state_dict with an unused 64 MB tensor sends only the tensors loaded', async () => {
  const mha = proxied.createMultiheadAttention(CONFIG);
  sent.length = 0;
  await mha.loadStateDict({ ...under('attn.'), 'embed.weight': { data: new Float32Array(16 << 20), shape: [4096, 4096] } },
    { prefix: 'attn.' });
  const loaded = sent.find(({ method }) => method === 'loadStateDict');
  const used = Object.values(WEIGHTS).reduce((sum, array) => sum + array.byteLength, 0);
  assert.ok(loaded.bytes <= used + 16, `sent ${loaded.bytes} bytes to load ${used}`);
  mha.dispose();
});

// Where memory cannot be shared (WebKit as shipped), a call's arrays are copied once into a buffer
// of their own that is handed over, not cloned (a copy on each side); the caller's are never
// handed over.
test('without shared memory a forward hands over one copy of its arrays; the caller keeps its own, unchanged', async () => {
  globalThis.crossOriginIsolated = false;
  try {
    const outputs = [];
    const query = { data: filled(3 * E, 6), shape: [3, 1, E] };
    const mask = new Uint8Array([0, 0, 1]);
    for (const lib of [inThread, proxied]) {
      const mha = lib.createMultiheadAttention(CONFIG);
      await mha.loadStateDict(WEIGHTS);
      sent.length = 0;
      outputs.push([...(await mha.forward(query, query, query, { keyPaddingMask: { data: mask, shape: [1, 3] } })).output.data]);
      mha.dispose();
    }
    const [forward] = sent.filter(({ method }) => method === 'forward');
    assert.equal(forward.bytes, query.data.byteLength + mask.byteLength);
    assert.ok(forward.transferred >= forward.bytes && forward.transferred < forward.bytes + 64, JSON.stringify(forward));
    assert.deepEqual([...query.data], [...filled(3 * E, 6)]);
    assert.deepEqual([...mask], [0, 0, 1]);
    assert.deepEqual(outputs[1], outputs[0]);
  } finally {
    globalThis.crossOriginIsolated = true;
  }
});

// The caller's thread reads the checkpoint (proxy_client.js, READS): the worker gets the headers
// and, handed over, each tensor the module uses, nothing of the rest.
test("loadSafetensors sends the headers and hands over the tensors under the prefix, not the rest", async () => {
  const shapes = { in_proj_weight: [3 * E, E], in_proj_bias: [3 * E], 'out_proj.weight': [E, E], 'out_proj.bias': [E] };
  const bytes = writeSafetensors({
    ...Object.fromEntries(Object.entries(WEIGHTS).map(([key, data]) => [`attn.${key}`, { shape: shapes[key], data }])),
    'embed.weight': { shape: [4096, 4096], data: new Float32Array(16 << 20) },
  });
  const outputs = [];
  for (const lib of [inThread, proxied]) {
    const mha = lib.createMultiheadAttention(CONFIG);
    await mha.loadSafetensors([bytes, bytes.slice()], { prefix: 'attn.' }).catch(() => {});
    sent.length = 0;
    await mha.loadSafetensors(bytes, { prefix: 'attn.' });
    outputs.push([...(await mha.forward(QUERY, QUERY, QUERY)).output.data]);
    mha.dispose();
  }
  const steps = sent.filter(({ method }) => method === STEP);
  assert.deepEqual(steps.map(({ step }) => step), ['start', 'feed', 'feed', 'feed', 'feed', 'finish']);
  const used = Object.values(WEIGHTS).reduce((sum, array) => sum + array.byteLength, 0);
  const feeds = steps.filter(({ step }) => step === 'feed');
  assert.equal(feeds.reduce((sum, { transferred }) => sum + transferred, 0), used);
  assert.equal(feeds.reduce((sum, { bytes: count }) => sum + count, 0), used);
  assert.ok(steps[0].bytes < 1024 && steps[0].transferred === 0, JSON.stringify(steps[0]));
  assert.deepEqual(outputs[1], outputs[0]);
  const broken = new Uint8Array(64).fill(7);
  const [here, there] = await Promise.all([inThread, proxied].map((lib) =>
    outcome(lib.createMultiheadAttention(CONFIG).loadSafetensors(broken))));
  assert.ok(here.error, JSON.stringify(here));
  assert.deepEqual(there, here);
});

test('a load aborted while the worker takes a tensor reads nothing more', async () => {
  const shapes = { in_proj_weight: [3 * E, E], in_proj_bias: [3 * E], 'out_proj.weight': [E, E], 'out_proj.bias': [E] };
  const bytes = writeSafetensors(Object.fromEntries(Object.entries(WEIGHTS).map(([key, data]) => [key, { shape: shapes[key], data }])));
  const mha = proxied.createMultiheadAttention(CONFIG);
  const controller = new AbortController();
  let loaded = 0;
  let atAbort = null;
  const worker = proxied.connection.worker;
  worker.postMessage = function postMessage(message, transfer) {
    if (message.method === STEP && message.args[0] === 'feed' && atAbort === null) {
      atAbort = loaded;
      controller.abort();
    }
    return Watched.prototype.postMessage.call(this, message, transfer);
  };
  try {
    const error = await mha.loadSafetensors(new Blob([bytes]), { signal: controller.signal,
      onProgress: (p) => { loaded = p.loaded; } }).then(() => null, (e) => e);
    assert.equal(error?.name, 'AbortError', String(error));
    assert.equal(loaded, atAbort, 'bytes read after the abort');
  } finally {
    delete worker.postMessage;
    mha.dispose();
  }
});

test('an unknown name outside the prefix is still named by the error that lists the modules', async () => {
  const stateDict = { 'encoder.attn.in_proj_weight': WEIGHTS.in_proj_weight, 'encoder.attn.bias': filled(E, 1) };
  const [here, there] = await Promise.all([inThread, proxied].map((lib) =>
    outcome(lib.createMultiheadAttention(CONFIG).loadStateDict(stateDict, { prefix: 'decoder.' }))));
  assert.ok(here.error, JSON.stringify(here));
  assert.deepEqual(there, here);
});

test('an unused function-valued entry loads alike in both modes', async () => {
  for (const lib of [inThread, proxied]) {
    const mha = lib.createMultiheadAttention(CONFIG);
    const stateDict = { ...under('attn.'), 'helper.fn': () => 1 };
    assert.deepEqual(await outcome(mha.loadStateDict(stateDict, { prefix: 'attn.' })), { value: undefined });
    const { output } = await mha.forward(QUERY, QUERY, QUERY);
    assert.equal(output.data.length, 3 * E);
    mha.dispose();
  }
});

test("the core's errors reach the caller as the same class with the same message", async () => {
  const refused = (lib) => outcome(lib.createMultiheadAttention(CONFIG).loadStateDict({ 'x.weight': filled(4, 0) }));
  const here = await refused(inThread);
  assert.equal(here.error?.type, 'MHAError');
  assert.deepEqual(await refused(proxied), here);
  for (const error of [new MHAError('m'), new TypeError('t'), new RangeError('r')]) {
    const back = errorFrom(errorFields(error));
    assert.equal(back.constructor, error.constructor);
    assert.equal(back.message, error.message);
    assert.equal(back.name, error.name);
  }
});

test('a worker ended mid-call rejects the calls pending with an MHAError; the next call starts afresh', async () => {
  const mha = proxied.createMultiheadAttention(CONFIG);
  const loading = mha.loadStateDict(WEIGHTS);
  const pending = proxied.heapInfo();
  proxied.terminate();
  for (const call of [loading, pending]) {
    await assert.rejects(call, (error) => error instanceof MHAError && /the engine's worker stopped/.test(error.message));
  }
  const again = proxied.createMultiheadAttention(CONFIG);
  await again.loadStateDict(WEIGHTS);
  assert.equal((await again.forward(QUERY, QUERY, QUERY)).output.data.length, 3 * E);
});

// Its first forward arrives in the worker unreadable (helpers/proxy_unreadable_worker.js); this
// test fails in 10 s where that call would wait for good.
test('a message the worker cannot read rejects its call with an MHAError; the next call starts afresh', async () => {
  const env = { ...nodeEnv, startWorker: (script) => nodeEnv.startWorker({ ...script,
    url: new URL('./helpers/proxy_unreadable_worker.js', import.meta.url).href }) };
  const lossy = await startProxy({}, FILES, env);
  try {
    const mha = lossy.createMultiheadAttention(CONFIG);
    await mha.loadStateDict(WEIGHTS);
    let timer;
    const stalled = new Promise((resolve) => { timer = setTimeout(resolve, 10_000, 'stalled'); });
    const outcome = await Promise.race([mha.forward(QUERY, QUERY, QUERY).then(() => 'resolved', (error) => error),
      stalled]);
    clearTimeout(timer);
    assert.ok(outcome instanceof MHAError, String(outcome));
    assert.match(outcome.message, /the engine's worker stopped \(.*could not be read\)/);
    // (Not a forward: the new worker loses its first one too.)
    const again = lossy.createMultiheadAttention(CONFIG);
    await again.loadStateDict(WEIGHTS);
    assert.ok((await lossy.heapInfo()).inUseBytes > 0);
  } finally {
    lossy.terminate();
  }
});

// A value as both modes can compare it: arrays' contents, caches as 'a cache'.
function summary(value) {
  if (ArrayBuffer.isView(value)) return Array.from(value);
  if (Array.isArray(value)) return value.map(summary);
  if (value === null || typeof value !== 'object') return value;
  if (Object.getPrototypeOf(value) !== Object.prototype) return 'an object';
  return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, summary(v)]));
}

const CHECKPOINT = writeSafetensors(Object.fromEntries(Object.entries(WEIGHTS).map(([key, data]) =>
  [key, { shape: { in_proj_weight: [3 * E, E], in_proj_bias: [3 * E], 'out_proj.weight': [E, E], 'out_proj.bias': [E] }[key], data }])));

const GETTERS = ['length', 'held', 'padding', 'maxLength', 'batchSize', 'dtype', 'bytes', 'rolling'];

// A session of random calls on `lib` drawn from `seed`: rounds of 1-6 calls sent at once (modules
// made, loaded (state_dicts, checkpoints' bytes) and disposed; forwards with and without caches; caches made, changed, cloned,
// selected, saved and loaded back, disposed, some while their calls are pending; calls refused
// by the core), then every object's getters. What each call and getter gave, in order.
async function randomSession(lib, seed) {
  const random = lcg(seed);
  const below = (n) => Math.floor(random() * n);
  const input = (L) => ({ data: Float32Array.from({ length: L * E }, () => 2 * random() - 1), shape: [L, 1, E] });
  const modules = [];
  const caches = [];   // [cache, its module]
  const log = [];
  const settled = (promise) => promise.then((value) => ({ value: summary(value) }),
    (error) => ({ error: `${error.constructor.name}: ${error.message}` }));
  const take = (list) => list.splice(below(list.length), 1)[0];
  const keep = (mha) => (cache) => {
    caches.push([cache, mha]);
    return cache;
  };
  for (let round = 0; round < 80; round++) {
    const calls = [];
    for (let n = 1 + below(6); n > 0; n--) {
      const op = below(10);
      if (modules.length === 0 || op === 0) {
        const mha = lib.createMultiheadAttention(CONFIG);
        modules.push(mha);
        // From a state_dict or a checkpoint's bytes (read in this thread, step by step, holding
        // the channel: the other calls wait, as in-thread, where bytes load within the call; not
        // a stream, which in-thread loads while the calls made after it run: docs/design.md,
        // "Loading large checkpoints in a page").
        if (random() < 0.5) calls.push(mha.loadStateDict(random() < 0.9 ? WEIGHTS : { in_proj_weight: filled(5, 0) }));
        else calls.push(mha.loadSafetensors(random() < 0.9 ? CHECKPOINT : CHECKPOINT.subarray(0, 100)));
      } else if (op === 1) {
        const mha = modules[below(modules.length)];
        keep(mha)(mha.createKVCache({ batchSize: 1, maxLength: 4 + below(12), dtype: random() < 0.5 ? 'float32' : 'float16' }));
      } else if (op <= 3 || caches.length === 0) {
        const mha = modules[below(modules.length)];
        const q = input(1 + below(4));
        calls.push(mha.forward(q, q, q, { needWeights: random() < 0.5 }));
      } else if (op <= 5) {
        const [cache, mha] = caches[below(caches.length)];
        const q = input(1 + below(3));
        calls.push(mha.forward(q, q, q, { cache }));
      } else if (op === 6) {
        const [cache, mha] = caches[below(caches.length)];
        const change = below(6);
        if (change === 0) calls.push(cache.truncate(below(4)));
        else if (change === 1) calls.push(cache.reset());
        else if (change === 2) calls.push(cache.resize(4 + below(12)));
        else if (change === 3) calls.push(cache.clone().then(keep(mha)));
        else if (change === 4) calls.push(cache.select(new Int32Array([below(2)])).then(keep(mha)));
        else calls.push(cache.save().then((bytes) => (random() < 0.5 ? mha : lib).loadKVCache(bytes)).then(keep(mha)));
      } else if (op === 7 && caches.length > 0) {
        take(caches)[0].dispose();
      } else if (op === 8 && modules.length > 1) {
        take(modules).dispose();
      } else {
        const q = input(1 + below(4));
        calls.push(lib.scaledDotProductAttention({ data: q.data, shape: [1, 2, q.shape[0], E / 2] },
          { data: q.data, shape: [1, 2, q.shape[0], E / 2] }, { data: q.data, shape: [1, 2, q.shape[0], E / 2] },
          { isCausal: random() < 0.5 }));
      }
    }
    log.push(await Promise.all(calls.map(settled)));
    log.push(modules.map((mha) => mha.memory), caches.map(([cache]) => GETTERS.map((key) => cache[key])));
  }
  for (const [cache] of caches) cache.dispose();
  for (const mha of modules) mha.dispose();
  return log;
}

test('random calls with delays injected both ways and in the worker: each result and getter as in-thread', async () => {
  const slowed = await startProxy({}, FILES, watchedEnv(31));
  try {
    for (const seed of [1, 2, 3]) {
      const here = await randomSession(inThread, seed);
      const there = await randomSession(slowed, seed);
      assert.equal(there.length, here.length);
      there.forEach((entry, i) => assert.deepEqual(entry, here[i], `seed ${seed}, entry ${i}`));
    }
  } finally {
    slowed.terminate();
  }
});

test('a worker ended at random points, with delays injected: the calls pending reject with an MHAError, later ones work', async () => {
  const slowed = await startProxy({}, FILES, watchedEnv(41));
  const random = lcg(43);
  try {
    for (let round = 0; round < 10; round++) {
      const mha = slowed.createMultiheadAttention(CONFIG);
      const calls = [mha.loadStateDict(WEIGHTS), mha.forward(QUERY, QUERY, QUERY), slowed.heapInfo()];
      await new Promise((resolve) => setTimeout(resolve, 3 * random()));
      const answered = calls.map(() => false);
      calls.forEach((call, i) => call.then(() => { answered[i] = true; }, () => {}));
      slowed.terminate();
      for (const [i, call] of calls.entries()) {
        await call.then(() => assert.ok(answered[i]), (error) => assert.ok(error instanceof MHAError &&
          /the engine's worker stopped \(lib\.terminate\(\) was called\)/.test(error.message), error.message));
      }
      const again = slowed.createMultiheadAttention(CONFIG);
      await again.loadStateDict(WEIGHTS);
      assert.equal((await again.forward(QUERY, QUERY, QUERY)).output.data.length, 3 * E);
      again.dispose();
    }
  } finally {
    slowed.terminate();
  }
});

test('after lib.dispose(), calls on what it made reject (getters throw) as in-thread: disposed with its library', async () => {
  const after = [];
  for (const lib of [await loadMHA({ threads: 1 }), await startProxy({ threads: 1 }, FILES, watchedEnv())]) {
    const mha = lib.createMultiheadAttention(CONFIG);
    await mha.loadStateDict(WEIGHTS);
    const cache = mha.createKVCache({ batchSize: 1, maxLength: 8 });
    await mha.forward(QUERY, QUERY, QUERY, { cache });
    const pending = lib.info.proxy && mha.forward(QUERY, QUERY, QUERY);
    lib.dispose();
    if (pending) {
      await assert.rejects(pending, (error) => error instanceof MHAError &&
        /^mha-wasm: the library was disposed \(lib\.dispose\(\)\) before the call finished/.test(error.message));
    }
    const thrown = (read) => {
      try {
        return { value: read() };
      } catch (error) {
        return { error: `${error.constructor.name}: ${error.message}` };
      }
    };
    after.push([
      await outcome(mha.forward(QUERY, QUERY, QUERY)), await outcome(mha.loadStateDict(WEIGHTS)),
      await outcome(cache.truncate(0)), await outcome(cache.clone()), await outcome(lib.heapInfo()),
      thrown(() => mha.memory), thrown(() => cache.length),
      thrown(() => mha.createKVCache({ batchSize: 1, maxLength: 8 })),
      thrown(() => lib.createMultiheadAttention(CONFIG)),
    ]);
  }
  assert.deepEqual(after[1], after[0]);
  assert.match(after[0][0].error.message,
    /^forward: expected a live module, received one that was disposed with its library$/);
  assert.match(after[0][2].error.message,
    /^truncate: expected a live KVCache, received one that was disposed with its library$/);
});

test("getters' values as in-thread: parameters frozen, a cache's padding a fresh array at each read", async () => {
  for (const lib of [inThread, proxied]) {
    const mha = lib.createMultiheadAttention(CONFIG);
    const cache = mha.createKVCache({ batchSize: 2, maxLength: 4 });
    const { parameters } = mha;
    assert.ok(Object.isFrozen(parameters) && parameters.every((p) => Object.isFrozen(p) && Object.isFrozen(p.shape)),
      `${lib.info.proxy ? 'proxy' : 'in-thread'}: parameters not frozen`);
    assert.equal(mha.parameters, parameters);
    const padding = cache.padding;
    padding[0] = 5;
    assert.notEqual(cache.padding, padding);
    assert.deepEqual(cache.padding, [0, 0], `${lib.info.proxy ? 'proxy' : 'in-thread'}: padding changed by its reader`);
    cache.dispose();
    mha.dispose();
  }
});

test('mha.memory once each load has settled: as in-thread (loaded, a failed load, another weights dtype, a checkpoint)', async () => {
  const shapes = { in_proj_weight: [3 * E, E], in_proj_bias: [3 * E], 'out_proj.weight': [E, E], 'out_proj.bias': [E] };
  const bytes = writeSafetensors(Object.fromEntries(Object.entries(WEIGHTS).map(([key, data]) => [key, { shape: shapes[key], data }])));
  const seen = [];
  for (const lib of [inThread, proxied]) {
    const memory = [];
    for (const weightsDtype of ['float32', 'bfloat16', 'int8']) {
      const mha = lib.createMultiheadAttention({ ...CONFIG, weightsDtype });
      memory.push(mha.memory);
      await mha.loadStateDict(WEIGHTS);
      memory.push(mha.memory);
      await mha.loadStateDict({ ...WEIGHTS, in_proj_bias: filled(5, 0) }).catch(() => {});
      memory.push(mha.memory);
      await mha.loadSafetensors(bytes);
      memory.push(mha.memory);
      mha.dispose();
    }
    seen.push(memory);
  }
  assert.ok(seen[0][1] > 0, JSON.stringify(seen[0]));
  assert.deepEqual(seen[1], seen[0]);
});

// A 1 ms timer: a forward of a few ms through the proxy (a machine several times faster than those
// the suite runs on) still spans several of its periods.
test("loadMHA({ proxy: true }) in Node: the event loop runs during a long forward (a 1 ms timer ticks), which in-thread blocks it", async (t) => {
  const lib = await loadMHA({ proxy: true });
  assert.equal(lib.info.proxy, true);
  const E2 = 64;
  const weights = {
    in_proj_weight: filled(3 * E2 * E2, 1), in_proj_bias: filled(3 * E2, 2),
    'out_proj.weight': filled(E2 * E2, 3), 'out_proj.bias': filled(E2, 4),
  };
  const x = { data: filled(2048 * E2, 5), shape: [2048, 1, E2] };
  const ticksDuring = async (library) => {
    const mha = library.createMultiheadAttention({ embedDim: E2, numHeads: 4 });
    await mha.loadStateDict(weights);
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const start = performance.now();
    const { output } = await mha.forward(x, x, x, { needWeights: false });
    const ms = performance.now() - start;
    clearInterval(timer);
    mha.dispose();
    return { ticks, ms, output: output.data };
  };
  const here = await ticksDuring(inThread);
  const there = await ticksDuring(lib);
  lib.dispose();
  t.diagnostic(`in-thread: ${here.ticks} ticks in ${here.ms.toFixed(0)} ms; proxy: ${there.ticks} ticks in ${there.ms.toFixed(0)} ms`);
  assert.equal(here.ticks, 0);
  assert.ok(there.ticks >= 2, `${there.ticks} ticks in ${there.ms.toFixed(0)} ms`);
  assert.deepEqual(there.output, here.output);
});

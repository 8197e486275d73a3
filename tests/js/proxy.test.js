// The proxy (web/src/proxy_client.js and proxy_worker.js, the code a page runs) in Node: the
// client on this thread, its worker in a worker thread with the real engine
// (helpers/proxy_node_worker.js), as on a cross-origin isolated page (arrays staged in shared
// memory). What it sends and what it answers, against the same calls in the calling thread.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Worker as NodeWorker } from 'node:worker_threads';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { startProxy } from '../../web/src/proxy_client.js';
import { errorFields, errorFrom } from '../../web/src/proxy_table.js';
import { lcg } from './helpers/random.js';
import { writeSafetensors } from './helpers/safetensors.js';

globalThis.crossOriginIsolated = true;

// The bytes of typed arrays each message to the worker carried.
const sent = [];
const bytesOf = (message) => (message.staged ? message.staged.views.reduce((sum, [type, , length]) =>
  sum + length * globalThis[type].BYTES_PER_ELEMENT, 0) : 0) +
  (message.arrays ?? []).reduce((sum, array) => sum + array.byteLength, 0);

// The in-thread library first: Emscripten's glue sets globalThis.Worker to Node's own.
const inThread = await loadMHA();

// While set (a seed), the workers started wait at random: each message, both ways, arrives 0-2 ms
// late (in the order sent, as postMessage keeps it), and the worker thread sleeps 0-2 ms before
// it takes one (helpers/proxy_node_worker.js), so each side runs on meanwhile.
let delaySeed = null;

// Runs `deliver`s one after another, each 0-2 ms after the last (`random`), or at once.
function inOrder(random) {
  if (random === null) return (deliver) => deliver();
  let last = Promise.resolve();
  return (deliver) => {
    last = last.then(() => new Promise((resolve) => setTimeout(resolve, 2 * random()))).then(deliver);
  };
}

// The Web Worker API over a Node worker thread running the proxy's worker.
globalThis.Worker = class {
  constructor() {
    this.thread = new NodeWorker(new URL('./helpers/proxy_node_worker.js', import.meta.url),
      { workerData: { delaySeed } });
    const delayed = (offset) => inOrder(delaySeed === null ? null : lcg(delaySeed + offset));
    this.toWorker = delayed(1);
    const toClient = delayed(2);
    this.thread.on('message', (data) => toClient(() => this.onmessage({ data })));
    this.thread.on('error', ({ message }) => toClient(() => this.onerror({ message, preventDefault() {} })));
  }

  postMessage(message, transfer) {
    sent.push({ method: message.method, bytes: bytesOf(message) });
    // Cloned now, as postMessage does (it throws here for what cannot be cloned).
    const copy = structuredClone(message, { transfer });
    this.toWorker(() => this.thread.postMessage(copy, transfer));
  }

  terminate() {
    this.thread.terminate();
  }
};

const E = 16;
const CONFIG = { embedDim: E, numHeads: 2 };
const filled = (n, seed) => Float32Array.from({ length: n }, (_, i) => Math.sin(i * 0.37 + seed));
const WEIGHTS = {
  in_proj_weight: filled(3 * E * E, 1), in_proj_bias: filled(3 * E, 2),
  'out_proj.weight': filled(E * E, 3), 'out_proj.bias': filled(E, 4),
};
const under = (prefix) => Object.fromEntries(Object.entries(WEIGHTS).map(([key, value]) => [prefix + key, value]));
const QUERY = { data: filled(3 * E, 5), shape: [3, 1, E] };

const FILES = { proxyWorker: new URL('./helpers/proxy_node_worker.js', import.meta.url).href };
const proxied = await startProxy({}, FILES);
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

test("loadSafetensors sends a shard's header and the tensors under the prefix, not the rest", async () => {
  const shapes = { in_proj_weight: [3 * E, E], in_proj_bias: [3 * E], 'out_proj.weight': [E, E], 'out_proj.bias': [E] };
  const bytes = writeSafetensors({
    ...Object.fromEntries(Object.entries(WEIGHTS).map(([key, data]) => [`attn.${key}`, { shape: shapes[key], data }])),
    'embed.weight': { shape: [4096, 4096], data: new Float32Array(16 << 20) },
  });
  const outputs = [];
  for (const lib of [inThread, proxied]) {
    const mha = lib.createMultiheadAttention(CONFIG);
    sent.length = 0;
    await mha.loadSafetensors([bytes, bytes.slice()], { prefix: 'attn.' }).catch(() => {});
    await mha.loadSafetensors(bytes, { prefix: 'attn.' });
    outputs.push([...(await mha.forward(QUERY, QUERY, QUERY)).output.data]);
    mha.dispose();
  }
  const loads = sent.filter(({ method }) => method === 'loadSafetensors');
  assert.equal(loads.length, 2);
  for (const { bytes: count } of loads) assert.ok(count < 2 * (1 << 20), `sent ${count} bytes`);
  assert.deepEqual(outputs[1], outputs[0]);
  const broken = new Uint8Array(64).fill(7);
  const [here, there] = await Promise.all([inThread, proxied].map((lib) =>
    outcome(lib.createMultiheadAttention(CONFIG).loadSafetensors(broken))));
  assert.ok(here.error, JSON.stringify(here));
  assert.deepEqual(there, here);
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

// A value as both modes can compare it: arrays' contents, caches as 'a cache'.
function summary(value) {
  if (ArrayBuffer.isView(value)) return Array.from(value);
  if (Array.isArray(value)) return value.map(summary);
  if (value === null || typeof value !== 'object') return value;
  if (Object.getPrototypeOf(value) !== Object.prototype) return 'an object';
  return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, summary(v)]));
}

const GETTERS = ['length', 'held', 'maxLength', 'batchSize', 'dtype', 'bytes', 'rolling'];

// A session of random calls on `lib` drawn from `seed`: rounds of 1-6 calls sent at once (modules
// made, loaded and disposed; forwards with and without caches; caches made, changed, cloned,
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
        calls.push(mha.loadStateDict(random() < 0.9 ? WEIGHTS : { in_proj_weight: filled(5, 0) }));
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
  delaySeed = 31;
  const slowed = await startProxy({}, FILES);
  delaySeed = null;
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
  delaySeed = 41;
  const slowed = await startProxy({}, FILES);
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
    delaySeed = null;
    slowed.terminate();
  }
});

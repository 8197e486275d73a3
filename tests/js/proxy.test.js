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
import { writeSafetensors } from './helpers/safetensors.js';

globalThis.crossOriginIsolated = true;

// The bytes of typed arrays each message to the worker carried.
const sent = [];
const bytesOf = (message) => (message.staged ? message.staged.views.reduce((sum, [type, , length]) =>
  sum + length * globalThis[type].BYTES_PER_ELEMENT, 0) : 0) +
  (message.arrays ?? []).reduce((sum, array) => sum + array.byteLength, 0);

// The in-thread library first: Emscripten's glue sets globalThis.Worker to Node's own.
const inThread = await loadMHA();

// The Web Worker API over a Node worker thread running the proxy's worker.
globalThis.Worker = class {
  constructor() {
    this.thread = new NodeWorker(new URL('./helpers/proxy_node_worker.js', import.meta.url));
    this.thread.on('message', (data) => this.onmessage({ data }));
    this.thread.on('error', ({ message }) => this.onerror({ message, preventDefault() {} }));
  }

  postMessage(message, transfer) {
    sent.push({ method: message.method, bytes: bytesOf(message) });
    this.thread.postMessage(message, transfer);
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

const proxied = await startProxy({}, { proxyWorker: new URL('./helpers/proxy_node_worker.js', import.meta.url).href });
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

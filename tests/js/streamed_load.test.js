// loadSafetensors from a Blob, a ReadableStream, a Response and arrays of
// them (docs/design.md, "Loading large checkpoints in a page"): the same
// weights as from bytes; only the tensors used are read; progress is monotone
// and reaches its total; an aborted, truncated or malformed load rejects
// naming the shard (and tensor) and leaves the module unchanged; the heap's
// peak is the weights plus one tensor. Through the proxy (loadMHA({ proxy:
// true }), the page's client and worker over worker_threads) the caller's
// thread reads the checkpoint and the worker's core takes each tensor: the
// same results, errors, progress and aborts.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MHAError, loadMHA } from '../../web/src/index.js';
import { BUILDS } from './helpers/builds.js';
import { randomModule, randomTensor, sameBits } from './helpers/random.js';
import { writeSafetensors } from './helpers/safetensors.js';

const E = 32;
const CONFIG = { embedDim: E, numHeads: 4 };

// A checkpoint of CONFIG's parameters (seeded) under 'attn.', in two shards,
// each with a tensor the module does not use (the last in shard 0).
function checkpoint(seed, e = E) {
  const t = (shape, i) => ({ shape, data: randomTensor(shape, seed * 100 + i).data });
  const shards = [
    writeSafetensors({ 'attn.in_proj_weight': t([3 * e, e], 0), 'attn.in_proj_bias': t([3 * e], 1),
      'other.weight': t([4 * e, e], 2) }),
    writeSafetensors({ 'attn.out_proj.weight': t([e, e], 3), 'attn.out_proj.bias': t([e], 4),
      'other.bias': t([e], 5) }),
  ];
  return { shards, whole: writeSafetensors({ ...readAll(shards) }) };
}

// All tensors of the shards, for one file holding them.
function readAll(shards) {
  const all = {};
  for (const shard of shards) {
    const length = Number(new DataView(shard.buffer).getBigUint64(0, true));
    const header = JSON.parse(new TextDecoder().decode(shard.subarray(8, 8 + length)));
    for (const [name, { shape, data_offsets: [b, e] }] of Object.entries(header)) {
      all[name] = { shape, data: new Float32Array(shard.slice(8 + length + b, 8 + length + e).buffer) };
    }
  }
  return all;
}

// A copy of a file whose tensor `name` is said to be of `dtype` (of the same
// size) in its header.
function withDtype(file, name, dtype) {
  const length = Number(new DataView(file.buffer).getBigUint64(0, true));
  const text = new TextDecoder().decode(file.subarray(8, 8 + length))
    .replace(`"${name}":{"dtype":"F32"`, `"${name}":{"dtype":"${dtype}"`);
  const copy = file.slice();
  copy.set(new TextEncoder().encode(text), 8);
  return copy;
}

// A ReadableStream of `bytes` in chunks of `chunk` bytes; `pulled` counts
// the bytes handed out; `pause` (if given) is awaited before each chunk;
// `state.cancelled` tells whether the reader cancelled it.
function streamOf(bytes, { chunk = 1000, pulled = { bytes: 0 }, pause, state = {} } = {}) {
  let at = 0;
  return new ReadableStream({
    async pull(controller) {
      if (pause) await pause(at);
      if (at >= bytes.length) {
        controller.close();
        return;
      }
      const piece = bytes.slice(at, at + chunk);
      at += piece.length;
      pulled.bytes += piece.length;
      controller.enqueue(piece);
    },
    cancel() {
      state.cancelled = true;
    },
  }, { highWaterMark: 0 });
}

const OPTIONS = { prefix: 'attn.' };
const x = randomTensor([3, 1, E], 7);

for (const build of BUILDS) for (const proxy of [false, true]) {
  const loadLib = () => loadMHA({ build, proxy });
  describe(`streamed loadSafetensors on ${build}${proxy ? ', through the proxy' : ''}`, () => {
    test('Blob, ReadableStream, Response and mixed shards load what the bytes load in-thread', async () => {
      const lib = await loadLib();
      assert.equal(lib.info.proxy, proxy);
      const { shards, whole } = checkpoint(1);
      const reference = (await loadMHA({ build, proxy: false })).createMultiheadAttention(CONFIG);
      await reference.loadSafetensors(whole, OPTIONS);
      const expected = await reference.forward(x, x, x);
      const sources = {
        Blob: () => new Blob([whole]),
        File: () => new File([whole], 'model.safetensors'),
        ReadableStream: () => streamOf(whole),
        Response: () => new Response(whole),
        'Response without a length': () => new Response(streamOf(whole, { chunk: 333 })),
        'shards: Blob and ReadableStream': () => [new Blob([shards[0]]), streamOf(shards[1])],
        'shards: Response and bytes': () => [new Response(shards[0]), shards[1].buffer],
      };
      for (const [what, source] of Object.entries(sources)) {
        const mha = lib.createMultiheadAttention(CONFIG);
        await mha.loadSafetensors(source(), OPTIONS);
        assert.ok(sameBits(await mha.forward(x, x, x), expected), what);
        assert.equal(mha.memory, reference.memory, what);
        mha.dispose();
      }
      assert.deepEqual((await lib.listAttentionModules([new Blob([shards[0]]), streamOf(shards[1])]))
        .map((m) => m.prefix), ['attn.']);
      reference.dispose();
    });

    // Through the proxy the load's steps go to the worker one by one, yet calls made after it run
    // after it (the worker runs calls in the order made), as in-thread, where bytes load at once.
    test('a call made right after a load from bytes sees its weights; calls during a stream run',
      async () => {
        const lib = await loadLib();
        const { whole } = checkpoint(11);
        const reference = randomModule(lib, CONFIG, 12);
        const mha = lib.createMultiheadAttention(CONFIG);
        const loaded = mha.loadSafetensors(whole, OPTIONS);
        const [output] = await Promise.all([mha.forward(x, x, x), loaded]);
        assert.ok(sameBits(output, await mha.forward(x, x, x)));
        // Another module's forward made while a stream is read resolves (after the load, through
        // the proxy).
        const other = await Promise.all([mha.loadSafetensors(streamOf(whole, { chunk: 100 }), OPTIONS),
          reference.forward(x, x, x)]);
        assert.equal(other[1].output.data.length, x.data.length);
        mha.dispose();
        reference.dispose();
      });

    test('a stream is read only up to the last tensor used; progress is monotone to the total',
      async () => {
        const lib = await loadLib();
        const { shards } = checkpoint(2);
        // The unused tensor is the last of shard 0: it is never pulled.
        const pulled = { bytes: 0 };
        const events = [];
        const mha = lib.createMultiheadAttention(CONFIG);
        await mha.loadSafetensors([streamOf(shards[0], { chunk: 500, pulled }), new Blob([shards[1]])],
          { ...OPTIONS, onProgress: (p) => events.push(p) });
        const unused = 4 * E * E * 4;
        assert.ok(pulled.bytes <= shards[0].length - unused + 500,
          `${pulled.bytes} of ${shards[0].length} bytes pulled`);
        assert.ok(events.length > 3, `${events.length} progress events`);
        const { total } = events[0];
        for (let i = 1; i < events.length; ++i) {
          assert.equal(events[i].total, total);
          assert.ok(events[i].loaded > events[i - 1].loaded, JSON.stringify(events.slice(i - 1, i + 1)));
        }
        assert.equal(events.at(-1).loaded, total);
        // Shard 1's unused bias (E floats) is not read from the Blob.
        assert.equal(total, shards[0].length - unused + shards[1].length - E * 4);
        mha.dispose();
      });

    test('an abort mid-stream rejects with an AbortError and leaves the module unchanged',
      async () => {
        const lib = await loadLib();
        const mha = randomModule(lib, CONFIG, 3);
        const before = await mha.forward(x, x, x);
        const memory = mha.memory;
        const { whole } = checkpoint(4);
        const controller = new AbortController();
        const state = { cancelled: false };
        const stream = streamOf(whole, { chunk: 256, state,
          pause: async (at) => { if (at > 2000) controller.abort(); } });
        const error = await mha.loadSafetensors(stream, { ...OPTIONS, signal: controller.signal })
          .then(() => null, (e) => e);
        assert.ok(error instanceof MHAError, String(error));
        assert.equal(error.name, 'AbortError');
        assert.match(error.message, /^loadSafetensors: aborted/);
        assert.ok(state.cancelled, 'the stream was cancelled');
        assert.ok(sameBits(await mha.forward(x, x, x), before));
        assert.equal(mha.memory, memory);
        // Aborted before the call: rejects at once, nothing read.
        const pulled = { bytes: 0 };
        const early = await mha.loadSafetensors(streamOf(whole, { pulled }),
          { ...OPTIONS, signal: AbortSignal.abort() }).then(() => null, (e) => e);
        assert.equal(early?.name, 'AbortError');
        assert.equal(pulled.bytes, 0);
        // The module loads afterwards.
        await mha.loadSafetensors(new Blob([whole]), OPTIONS);
        assert.ok(!sameBits(await mha.forward(x, x, x), before));
        mha.dispose();
      });

    test('a module disposed mid-stream rejects the load and cancels its stream', async () => {
      const lib = await loadLib();
      const mha = lib.createMultiheadAttention(CONFIG);
      const state = { cancelled: false };
      const stream = streamOf(checkpoint(10).whole, { chunk: 256, state,
        pause: async (at) => { if (at > 2000) mha.dispose(); } });
      await assert.rejects(mha.loadSafetensors(stream, OPTIONS), (e) => e instanceof MHAError &&
        e.message === 'loadSafetensors: expected a live module, received one that was disposed');
      assert.ok(state.cancelled);
    });

    test('an error onProgress throws rejects the load as thrown (not as a shard\'s); the module unchanged',
      async () => {
        const lib = await loadLib();
        const mha = randomModule(lib, CONFIG, 13);
        const before = await mha.forward(x, x, x);
        const { whole } = checkpoint(14);
        // The first event (once the headers are read) and one while a tensor is read.
        for (const at of [1, 3]) {
          const thrown = new TypeError(`onProgress's own error at event ${at}`);
          let events = 0;
          const error = await mha.loadSafetensors(streamOf(whole, { chunk: 500 }), { ...OPTIONS,
            onProgress: () => { if (++events === at) throw thrown; } }).then(() => null, (e) => e);
          assert.equal(error, thrown, `event ${at}: ${error}`);
        }
        assert.ok(sameBits(await mha.forward(x, x, x), before));
        mha.dispose();
      });

    test('truncated, malformed and wrong sources reject naming the shard; the module unchanged',
      async () => {
        const lib = await loadLib();
        const mha = randomModule(lib, CONFIG, 5);
        const before = await mha.forward(x, x, x);
        const { shards, whole } = checkpoint(6);
        const garbage = new Uint8Array(64).fill(7);
        const cases = [
          // Into attn.out_proj.bias (other.bias, unused, ends the file).
          [() => streamOf(whole.subarray(0, whole.length - E * 4 - 100)),
            /^loadSafetensors: bytes: the file ended before the end of tensor 'attn\.\S+' \(bytes \d+ to \d+\): truncated\?$/],
          [() => [new Blob([shards[0]]), streamOf(shards[1].subarray(0, 40))],
            /^loadSafetensors: bytes\[1\] \(shard 1\): the file ended inside its \d+-byte header$/],
          [() => [shards[0], new Response(garbage)], /^loadSafetensors: .*shard 1/],
          // The core's errors on a tensor name its shard too.
          [() => [shards[0], new Blob([withDtype(shards[1], 'attn.out_proj.bias', 'I32')])],
            /^loadSafetensors: bytes\[1\] \(shard 1\): .*tensor "attn\.out_proj\.bias" has dtype I32/],
          [() => new ReadableStream({ start(c) { c.enqueue('text'); c.close(); } }),
            /^loadSafetensors: bytes: expected a stream of Uint8Arrays, received the string 'text'$/],
          [() => new Response('missing', { status: 404 }),
            /^loadSafetensors: bytes: the Response has status 404/],
          [() => [whole, 'model.safetensors'],
            /^loadSafetensors: bytes\[1\]: expected a Uint8Array, an ArrayBuffer, a Blob, a Response or a ReadableStream, received the string 'model.safetensors'$/],
        ];
        for (const [source, message] of cases) {
          await assert.rejects(mha.loadSafetensors(source(), OPTIONS),
            (e) => e instanceof MHAError && message.test(e.message), String(message));
          assert.ok(sameBits(await mha.forward(x, x, x), before), String(message));
        }
        const used = new Response(whole);
        await used.arrayBuffer();
        await assert.rejects(mha.loadSafetensors(used, OPTIONS), /the Response's body was already read/);
        for (const [options, message] of [[{ onProgress: 1 }, /onProgress: expected a function/],
          [{ signal: {} }, /signal: expected an AbortSignal/], [{ other: 1 }, /unknown option 'other'/]]) {
          await assert.rejects(mha.loadSafetensors(whole, { ...OPTIONS, ...options }),
            (e) => e instanceof MHAError && message.test(e.message));
        }
        mha.dispose();
      });
  });
}

// The WASM heap's top (sbrk) only grows (dlmalloc does not trim it here), so
// its rise over a load bounds the load's peak. Before streaming, a load held
// the file's tensors, their float32 copies and the weights at once.
for (const proxy of [false, true]) test(`the heap peaks at the weights plus the largest tensor${proxy ? ' (proxy)' : ''}`, async () => {
  const lib = await loadMHA({ build: BUILDS[0], proxy });
  const e = 512;
  const { shards } = checkpoint(8, e);
  const mha = lib.createMultiheadAttention({ embedDim: e, numHeads: 8 });
  const top = (await lib.heapInfo()).heapTop;
  await mha.loadSafetensors([new Blob([shards[0]]), streamOf(shards[1], { chunk: 65536 })], OPTIONS);
  const rise = (await lib.heapInfo()).heapTop - top;
  const largest = 3 * e * e * 4;
  assert.ok(rise <= (mha.memory + largest) * 1.05,
    `the heap rose ${rise} bytes for weights of ${mha.memory} and a largest tensor of ${largest}`);
  mha.dispose();
});

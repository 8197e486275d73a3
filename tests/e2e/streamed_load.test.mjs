// A checkpoint of a few hundred MB in two shards, generated here (not committed) and served over
// HTTP, loaded in each browser from fetch() Responses (docs/design.md, "Loading large checkpoints
// in a page"): the heap peaks at the weights plus the largest tensor (+ 5 %), measured as the rise
// of the WASM heap's top (sbrk: dlmalloc never gives memory back, so the top is a high-water mark),
// and in Chromium the page's JS heap holds no tensor (the largest rise held, performance.memory
// after a gc(), sampled during the load, within JS_SPARE; elsewhere the JS heap is not measured);
// progress is monotone to its total; the unused tensor closing each shard is never read;
// and a load aborted halfway leaves the module's outputs and memory as they were. The page's default
// library (the proxy: the page's thread reads, the worker's core loads; the threaded build where
// the browser shares memory) loads the same weights, with the worker's heap at the same peak and
// the page holding one tensor's bytes at most.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { after, before } from 'node:test';
import { expectedBuild, titledReady, useTestPage } from './harness.mjs';

const E = 3072;
const CONFIG = { embedDim: E, numHeads: 24 };
const UNUSED = [4096, 4096];   // 64 MiB closing each shard
const UNUSED_BYTES = 4096 * 4096 * 4;

// A .safetensors file of float32 tensors [name, shape, value] filled with one value each.
function shard(tensors) {
  const header = {};
  let offset = 0;
  for (const [name, shape] of tensors) {
    const bytes = shape.reduce((a, b) => a * b) * 4;
    header[name] = { dtype: 'F32', shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  // Padded with spaces (as the format allows) so that the data starts 8-byte aligned.
  const text = JSON.stringify(header);
  const json = Buffer.from(text.padEnd(Math.ceil(text.length / 8) * 8));
  const file = new Uint8Array(8 + json.length + offset);
  new DataView(file.buffer).setBigUint64(0, BigInt(json.length), true);
  file.set(json, 8);
  for (const [name, , value] of tensors) {
    const [begin, end] = header[name].data_offsets;
    new Float32Array(file.buffer, 8 + json.length + begin, (end - begin) / 4).fill(value);
  }
  return file;
}

const SHARDS = [
  [['attn.in_proj_weight', [3 * E, E], 1e-3], ['attn.in_proj_bias', [3 * E], 0.01],
    ['other.weight', UNUSED, 0.5]],
  [['attn.out_proj.weight', [E, E], 2e-3], ['attn.out_proj.bias', [E], 0.01], ['other.bias', UNUSED, 0.5]],
];
const LARGEST = 3 * E * E * 4;
// What the page's JS heap may hold beyond the tensor the proxy hands over: the chunk being read and
// what the engine keeps around a load (code it compiles, objects a gc() leaves), which varies from
// run to run and is not the package's; less than the next tensor (E * E floats), so a page that
// held a second tensor, or the read chunks of one, still fails.
const JS_SPARE = 32 * 2 ** 20;
const TENSORS_READ = SHARDS.flat().filter(([name]) => name.startsWith('attn.')).length;

useTestPage('/tests/e2e/pages/streamed_load.html', { tests: true, ready: titledReady }, (ctx) => {
  let server;
  let urls;
  let files;
  before(async () => {
    files = SHARDS.map(shard);
    // Another origin, as a CDN: CORS, and cross-origin resources allowed.
    server = createServer((req, res) => {
      const file = files[Number(/^\/shard-(\d)\.safetensors$/.exec(req.url)?.[1])];
      if (!file) {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'Content-Type': 'application/octet-stream', 'Content-Length': file.length,
        'Access-Control-Allow-Origin': '*', 'Cross-Origin-Resource-Policy': 'cross-origin' });
      let at = 0;
      const send = () => {
        while (at < file.length) {
          const chunk = file.subarray(at, at + (1 << 20));
          at += chunk.length;
          if (!res.write(chunk)) {
            res.once('drain', send);
            return;
          }
        }
        res.end();
      };
      res.on('close', () => { at = file.length; });
      send();
    });
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    urls = files.map((_, i) => `http://127.0.0.1:${server.address().port}/shard-${i}.safetensors`);
  });
  after(() => server?.close());

  // A module loaded from the shards by `which` library: the checks common to both.
  async function streamed(t, which) {
    const r = await ctx.page.evaluate(([u, c, w]) => window.streamTest.load(u, c, 'attn.', w),
      [urls, CONFIG, which], { timeout: 120_000 });
    const { output, ...rest } = r;
    t.diagnostic(JSON.stringify(rest));
    assert.equal(r.memory, 4 * (4 * E * E + 4 * E));
    // The peak: the WASM heap's (in-thread the page's, through the proxy the worker's), with 5 % to
    // spare; the page's JS heap (Chromium) holds no tensor in-thread (chunks go straight to the WASM
    // heap) and one through the proxy (each read into a buffer of its own, then handed over).
    assert.ok(r.heapRise <= (r.memory + LARGEST) * 1.05,
      `${which}: the WASM heap rose ${r.heapRise} bytes, for ${r.memory} of weights and a ${LARGEST}-byte tensor`);
    const tensorsHeld = which === 'inThread' ? 0 : LARGEST;
    assert.ok((r.jsRise ?? 0) <= tensorsHeld + JS_SPARE,
      `${which}: the page's JS heap rose ${r.jsRise} bytes, for ${tensorsHeld} bytes of tensors held`);
    // One event once the total is known, then at least one per tensor read: how many more depends
    // on the chunks the browser hands over (WebKit through the proxy gave 9 for 151 MB, as the
    // stream buffers while the worker takes a tensor).
    assert.ok(r.monotone && r.events >= 1 + TENSORS_READ, `${r.events} progress events, monotone: ${r.monotone}`);
    assert.equal(r.loaded, r.total);
    // Each shard is read up to its last tensor used; the unused one after it is not.
    assert.equal(r.total, files.reduce((n, file) => n + file.length, 0) - 2 * UNUSED_BYTES);
    assert.ok(output.every(Number.isFinite));
    return r;
  }

  let inThread;
  ctx.test('a multi-shard checkpoint streams in with the heap at the weights plus one tensor', async (t) => {
    inThread = await streamed(t, 'inThread');
  });

  ctx.test("through the page's default library (the proxy) it streams in alike", async (t) => {
    const r = await streamed(t, 'proxied');
    assert.equal(r.info.proxy, true);
    assert.equal(r.info.build, expectedBuild(ctx.spec, true).build);
    assert.deepEqual(r.output, inThread.output);
  });

  for (const which of ['inThread', 'proxied']) {
    ctx.test(`a load aborted halfway rejects with an AbortError and leaves the module unchanged (${which})`, async () => {
      const r = await ctx.page.evaluate(([u, c, w]) => window.streamTest.abort(u, c, 'attn.', 0.5, w),
        [urls, CONFIG, which], { timeout: 120_000 });
      assert.deepEqual(r.error && { name: r.error.name, isMHAError: r.error.isMHAError },
        { name: 'AbortError', isMHAError: true }, JSON.stringify(r));
      assert.match(r.error.message, /^loadSafetensors: aborted/);
      assert.ok(r.at >= 0.5 && r.at < 1, `aborted at ${r.at}`);
      assert.ok(r.unchanged, 'outputs or memory changed');
    });
  }
});

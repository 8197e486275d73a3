// Runs build/bench/simd_peak.wasm on <threads> worker threads at once and
// prints {"gflops": total, "threads"} (one JSON line).
//   node bench/peak/simd_peak.mjs <wasm file> <threads>
import fs from 'node:fs';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const FLOPS_PER_STEP = 12 * 8;
const STEPS = 200_000_000;

if (isMainThread) {
  const [wasmFile, threadsArg] = process.argv.slice(2);
  const threads = Number(threadsArg);
  const bytes = fs.readFileSync(wasmFile);
  const workers = Array.from({ length: threads }, () =>
    new Worker(new URL(import.meta.url), { workerData: bytes }));
  // Start together: each worker compiles first, then waits for "go".
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))));
  const start = performance.now();
  workers.forEach((w) => w.postMessage('go'));
  await Promise.all(workers.map((w) => new Promise((resolve) => w.once('message', resolve))));
  const seconds = (performance.now() - start) / 1000;
  const gflops = (threads * STEPS * FLOPS_PER_STEP) / seconds / 1e9;
  console.log(JSON.stringify({ gflops, threads }));
  process.exit(0);
} else {
  const { instance } = await WebAssembly.instantiate(workerData, {});
  instance.exports.simd_peak(1_000_000, 0.9999, 1e-4, 1);  // tier up before timing
  parentPort.postMessage('ready');
  parentPort.once('message', () => {
    instance.exports.simd_peak(STEPS, 0.9999, 1e-4, 1);
    parentPort.postMessage('done');
  });
}

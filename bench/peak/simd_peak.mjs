// Runs build/bench/simd_peak.wasm on <threads> worker threads at once and
// prints {"gflops": total, "threads"} (one JSON line).
//   node bench/peak/simd_peak.mjs <wasm file> <threads>
import fs from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { serveRounds, startWorkers } from './workers.mjs';

const FLOPS_PER_STEP = 12 * 8;
const STEPS = 200_000_000;

if (isMainThread) {
  const [wasmFile, threadsArg] = process.argv.slice(2);
  const threads = Number(threadsArg);
  const workers = await startWorkers(new URL(import.meta.url), threads, { bytes: fs.readFileSync(wasmFile) });
  const seconds = await workers.round();
  const gflops = (threads * STEPS * FLOPS_PER_STEP) / seconds / 1e9;
  console.log(JSON.stringify({ gflops, threads }));
  process.exit(0);
} else {
  await serveRounds(
    (wasm) => wasm.simd_peak(1_000_000, 0.9999, 1e-4, 1),  // tier up before timing
    (wasm) => wasm.simd_peak(STEPS, 0.9999, 1e-4, 1));
}

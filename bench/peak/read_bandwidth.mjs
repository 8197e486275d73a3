// Runs build/bench/read_bandwidth.wasm on <threads> worker threads at once,
// each reading its own <MiB>-MiB buffer, <passes> times; prints the best pass
// as {"gbps": total GB/s, "threads", "bytes": per thread} (one JSON line).
//   node bench/peak/read_bandwidth.mjs <wasm file> <threads> <MiB> <passes>
import fs from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { serveRounds, startWorkers } from './workers.mjs';

if (isMainThread) {
  const [wasmFile, threadsArg, mibArg, passesArg] = process.argv.slice(2);
  const threads = Number(threadsArg);
  const bytes = Number(mibArg) * 2 ** 20;
  const workers = await startWorkers(new URL(import.meta.url), threads,
    { bytes: fs.readFileSync(wasmFile), bufferBytes: bytes });
  await workers.round();  // tier up and fault in
  let best = Infinity;
  for (let i = 0; i < Number(passesArg); i++) best = Math.min(best, await workers.round());
  console.log(JSON.stringify({ gbps: (threads * bytes) / best / 1e9, threads, bytes }));
  process.exit(0);
} else {
  await serveRounds(
    (wasm, { bufferBytes }) => {
      if (!wasm.read_setup(bufferBytes)) throw new Error(`cannot allocate ${bufferBytes} bytes`);
    },
    (wasm) => wasm.read_pass());
}

// One measurement in a process of its own, so that heaps and peak RSS belong
// to one engine and one workload, and a peer that fails or hangs can be killed:
//   node bench/child.mjs <engine> <threads> <workload id>
// Workloads W*/GEMM read their inputs from build/bench/data and leave their
// output there; L<n> (longest-sequence search) makes its inputs and runs once.
// Prints one JSON line: { medianMs, reps, info?, heapBytes, maxRssBytes } or { error }.
import fs from 'node:fs';
import { wasmHeapBytes } from './lib/wasm_memory.mjs';
import { measure } from './lib/timing.mjs';
import { dataPath, findWorkload, makeInputs, readInputs } from './lib/workloads.mjs';
import { loadMhaWasm } from './engines/mha_wasm.mjs';
import { loadOrtNode, loadOrtWeb } from './engines/onnxruntime.mjs';
import { loadTfjsWasm } from './engines/tfjs_wasm.mjs';

const ENGINES = {
  'mha-wasm': loadMhaWasm,
  'onnxruntime-web': loadOrtWeb,
  'tfjs-wasm': loadTfjsWasm,
  'onnxruntime-node': loadOrtNode,
};

async function main([engineName, threadsArg, workloadId]) {
  const load = ENGINES[engineName];
  if (!load) throw new Error(`unknown engine "${engineName}"`);
  const threads = Number(threadsArg);
  const w = findWorkload(workloadId);
  const engine = await load({ threads });
  const longest = workloadId.startsWith('L');
  const inputs = longest ? makeInputs(w) : readInputs(w);
  const { run } = await engine.prepare(w, inputs);
  let result;
  if (longest) {
    const start = performance.now();
    await run();
    result = { medianMs: performance.now() - start, reps: 1 };
  } else {
    const output = await run();
    fs.writeFileSync(dataPath(w.id, `${engineName}-${threads}.out.f32`), new Uint8Array(output.buffer, output.byteOffset, output.byteLength));
    result = await measure(run);
  }
  return {
    ...result,
    ...(engine.info ? { info: engine.info } : {}),
    heapBytes: wasmHeapBytes(),
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
  };
}

let report;
try {
  report = await main(process.argv.slice(2));
} catch (error) {
  report = { error: String(error?.message ?? error).split('\n')[0].slice(0, 400) };
}
process.stdout.write(`${JSON.stringify(report)}\n`);
// Engines' worker threads would keep the process alive.
process.exit(0);

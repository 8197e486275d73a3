// One measurement in a process of its own, so that heaps and peak RSS belong
// to one engine and one workload, and a peer that fails or hangs can be killed:
//   node bench/child.mjs <engine> <threads> <workload id>
// Workloads W*/GEMM read their inputs from build/bench/data and leave their
// output there; L<n> (longest-sequence search) makes its inputs and runs once;
// D* (decoding) read what bench/export_decode.py wrote and time one step.
// A row with a "base" (issue 22's options, issue 24's precisions) is timed in alternation with
// it (baseMedianMs, pairRatio).
// Prints one JSON line: { medianMs, reps, info?, heapBytes, maxRssBytes,
// memory?, soak?, notCompared? } or { error }.
import fs from 'node:fs';
import { wasmHeapBytes } from './lib/wasm_memory.mjs';
import { measure, measurePair } from './lib/timing.mjs';
import { reportResult } from './lib/child_report.mjs';
import { isDecode } from './lib/decode.mjs';
import { dataPath, findWorkload, makeInputs, readDecodeInputs, readInputs, timingOf } from './lib/workloads.mjs';
import { loadMhaWasm } from './engines/mha_wasm.mjs';
import { loadOrtNode, loadOrtWeb } from './engines/onnxruntime.mjs';
import { loadTfjsWasm } from './engines/tfjs_wasm.mjs';

// name -> [load, which prepare of the engine runs a decoding step].
const ENGINES = {
  'mha-wasm': [loadMhaWasm, 'prepareDecode'],
  'mha-wasm no cache': [loadMhaWasm, 'prepareNoCache'],
  'onnxruntime-web': [loadOrtWeb, 'prepare'],
  'tfjs-wasm': [loadTfjsWasm, null],
  'onnxruntime-node': [loadOrtNode, 'prepare'],
};

function writeOutput(engineName, threads, w, output) {
  fs.writeFileSync(dataPath(w.id, `${engineName}-${threads}.out.f32`),
    new Uint8Array(output.buffer, output.byteOffset, output.byteLength));
}

async function main([engineName, threadsArg, workloadId]) {
  if (!ENGINES[engineName]) throw new Error(`unknown engine "${engineName}"`);
  const [load, decodePrepare] = ENGINES[engineName];
  const threads = Number(threadsArg);
  const w = findWorkload(workloadId);
  const decode = isDecode(w);
  if (decode && !decodePrepare) throw new Error(`${engineName} has no decoding workloads`);
  if (!decode && decodePrepare === 'prepareNoCache') throw new Error(`${engineName} runs D rows only`);
  const engine = await load({ threads });
  const longest = workloadId.startsWith('L');
  const inputs = decode ? await readDecodeInputs(w) : longest ? makeInputs(w) : await readInputs(w);
  const prepared = await engine[decode ? decodePrepare : 'prepare'](w, inputs);
  const { run, beforeRun } = prepared;
  let result;
  if (longest) {
    const start = performance.now();
    await run();
    result = { medianMs: performance.now() - start, reps: 1 };
  } else {
    await beforeRun?.();
    const output = await run();
    if (prepared.notCompared) result = { notCompared: prepared.notCompared };
    else writeOutput(engineName, threads, w, output);
    // An option row (issue 22) is timed in alternation with its base row's forward, a
    // precision row (issue 24) with its float32 step: the same engine, one module each.
    const base = w.base && await engine[decode ? decodePrepare : 'prepare'](findWorkload(w.base), inputs);
    const timed = base ? measurePair(base.run, run, timingOf(w), { a: base.beforeRun, b: beforeRun })
      : measure(run, timingOf(w), beforeRun);
    result = { ...result, ...await timed };
  }
  if (prepared.memory) result.memory = prepared.memory;
  if (prepared.soak && w.soakSteps) result.soak = await prepared.soak(w.soakSteps);
  return {
    ...result,
    ...(engine.info ? { info: engine.info } : {}),
    heapBytes: wasmHeapBytes(),
    maxRssBytes: process.resourceUsage().maxRSS * 1024,
  };
}

await reportResult(main);

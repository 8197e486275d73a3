// The speed guard, a stage of `npm test`: the package against onnxruntime-web
// on the rows of bench/guard.json at 1 thread, in alternated child processes
// (bench/child.mjs), the best of three medians per side; fails when a ratio
// onnxruntime-web / ours falls below its floor in bench/guard.json after one
// more measurement of that row. Ratios, not times: the peer runs on the same
// host in the same minutes, which cancels most of a host's speed, not all of it
// (bench/README.md, "The speed guard", says on which hosts the floors were set).
//   node bench/guard.mjs [row ids...]
import fs from 'node:fs';
import path from 'node:path';
import { BENCH_DIR, findWorkload, timingOf, writeInputs } from './lib/workloads.mjs';
import { isDecode } from './lib/decode.mjs';
import { ensureModels, log, raisePriority, runChild } from './lib/children.mjs';

const GUARD = JSON.parse(fs.readFileSync(path.join(BENCH_DIR, 'guard.json'), 'utf8'));
const THREADS = 1;
const PROCESSES = 3;

const child = (engine, w) => runChild(process.execPath,
  [path.join(BENCH_DIR, 'child.mjs'), engine, String(THREADS), w.id],
  { timeoutSeconds: timingOf(w).childTimeoutSeconds });

// The fastest of PROCESSES medians for ours (row `id`) and the peer (row
// `peer`: a precision row's peer runs its float32 row), processes alternated.
function measure({ id, peer = id }) {
  const best = { ours: Infinity, theirs: Infinity };
  for (let i = 0; i < PROCESSES; i++) {
    for (const [side, engine, row] of [['ours', 'mha-wasm', id], ['theirs', 'onnxruntime-web', peer]]) {
      const result = child(engine, findWorkload(row));
      if (result.error) throw new Error(`${row} ${engine}: ${result.error}`);
      best[side] = Math.min(best[side], result.medianMs);
    }
  }
  return { ...best, ratio: best.theirs / best.ours };
}

function main() {
  const wanted = process.argv.slice(2);
  const rows = GUARD.rows.filter((r) => !wanted.length || wanted.includes(r.id));
  const started = performance.now();
  const priority = raisePriority();
  const workloads = [...new Set(rows.flatMap((r) => [r.id, r.peer ?? r.id]))].map(findWorkload);
  ensureModels(workloads);
  workloads.filter((w) => !isDecode(w)).forEach(writeInputs);
  const lines = [];
  let failed = 0;
  for (const row of rows) {
    let m = measure(row);
    let note = '';
    if (m.ratio < row.floor) {
      log(`${row.id}: ratio ${m.ratio.toFixed(2)} below its floor ${row.floor}: measuring once more`);
      const again = measure(row);
      m = { ours: Math.min(m.ours, again.ours), theirs: Math.min(m.theirs, again.theirs) };
      m.ratio = m.theirs / m.ours;
      note = ' (measured twice)';
    }
    const ok = m.ratio >= row.floor;
    if (!ok) failed++;
    lines.push(`| ${row.id} | ${row.what} | ${m.ours.toFixed(3)} | ${m.theirs.toFixed(3)} | ` +
      `${m.ratio.toFixed(2)} | ${row.floor} | ${ok ? 'ok' : 'BELOW'}${note} |`);
    log(lines.at(-1));
  }
  console.log(`Speed guard (${THREADS} thread, ${priority}, ${((performance.now() - started) / 1000).toFixed(0)} s): ` +
    'median ms, best of 3 processes per side\n');
  console.log('| row | what | mha-wasm | onnxruntime-web | ratio | floor | |\n|---|---|---|---|---|---|---|');
  console.log(lines.join('\n'));
  if (failed) {
    console.error(`\nspeed guard: ${failed} row(s) below their floor: a change made them slower ` +
      '(compare with main\'s build: bench/README.md, "The speed guard")');
    process.exit(1);
  }
}

main();

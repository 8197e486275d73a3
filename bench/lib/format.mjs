// What the report's sections share: number and error formats, the output checks' summary.
export const MiB = 1 << 20;

// Three significant digits or so: 123, 12.3, 1.23 (digits below 10).
export const fixed = (value, digits) => value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : digits);

// A step's median: µs below 1 ms.
export const formatMs = (ms) => (ms < 1 ? `${fixed(ms * 1000, 2)} µs` : `${fixed(ms, 2)} ms`);

// A row with a base (issue 22's options, issue 24's precisions) over its base: the median of
// its pairs' ratios where it was timed in alternation (measurePair), else the two medians'
// ratio. get(engine, threads, id): a result of the run.
export function baseRatio(get, engine, threads, w) {
  const row = get(engine, threads, w.id);
  if (row?.pairRatio) return row.pairRatio;
  const base = get(engine, threads, w.base);
  return row?.medianMs && base?.medianMs ? row.medianMs / base.medianMs : undefined;
}

// Issue 22's options of a row (workloads.json "models"), as ", window 1024, softcap 50".
export const describeOptions = (w) => [
  w.window !== undefined ? `window ${Array.isArray(w.window) ? `[${w.window.join(', ')}]` : w.window}` : '',
  w.softcap ? `softcap ${w.softcap}` : '', w.alibi ? 'ALiBi' : '', w.sinks ? 'sinks' : '',
].filter(Boolean).map((o) => `, ${o}`).join('');

// A W row (a forward) in one line.
export function describeWorkload(w) {
  const masks = [w.cross ? 'cross-attention' : 'self-attention'];
  if (w.causal) masks.push('causal');
  if (w.kpmLengths) masks.push(`key_padding_mask (lengths ${w.kpmLengths.join(',')})`);
  if (w.needWeights) masks.push('need_weights (averaged)');
  return `${w.id}: B=${w.B} L=${w.L} S=${w.S} E=${w.E} H=${w.H}, ${masks.join(', ')}${describeOptions(w)}`;
}

// The reason of a failure, without onnxruntime's source paths and signatures.
export function shortError(error) {
  const ort = /ERROR_MESSAGE: (?:.*\(\) )?(.*)$/.exec(error);
  const reason = ort ? ort[1] : error;
  return reason.length > 60 ? `${reason.slice(0, 57)}...` : reason;
}

// A table section's title: Node's WebAssembly rows, native ones, or a browser's page rows
// (an engine family: 'wasm', 'native' or the browser's name).
export function sectionTitle(engines, family) {
  const titles = { wasm: 'WebAssembly in Node', native: 'native' };
  return titles[family] ?? `WebAssembly in ${engines.find((e) => e.family === family).browser}`;
}

// The output checks of a run: how many compared, which differ, which were not compared (and why).
export function outputChecks(engines, workloads, get) {
  const summary = { checked: 0, mismatches: [], skipped: [] };
  for (const engine of engines) {
    for (const threads of engine.threads) {
      for (const w of workloads) {
        const r = get(engine.name, threads, w.id);
        const where = `${engine.name} ${threads}t ${w.id}`;
        if (r?.notCompared) summary.skipped.push(`${where} (${r.notCompared})`);
        if (!r?.check) continue;
        summary.checked++;
        if (!r.check.ok) summary.mismatches.push(`${where} (max |diff| ${r.check.maxAbs.toExponential(1)})`);
      }
    }
  }
  return summary;
}

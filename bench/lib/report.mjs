// Renders the results of bench/run.mjs as Markdown: the forward table, the
// memory, longest-sequence and SIMD-limit results and the targets (issues 14 and 5), met
// or not; then the decoding section (report_decode.mjs).
import { isDecode } from './decode.mjs';
import { renderDecode } from './report_decode.mjs';
import { renderModels } from './report_models.mjs';
import { MiB, describeWorkload, fixed, outputChecks, sectionTitle, shortError } from './format.mjs';
import { config, isModelRow } from './workloads.mjs';

export function renderReport(run) {
  const { machine, load, minutes } = run;
  const lines = [];
  const out = (line = '') => lines.push(line);
  out('# mha-wasm benchmark');
  out();
  out(`${machine.date} · ${machine.cpu}, ${machine.cores} cores · Node ${machine.node} · ` +
      `commit ${machine.commit} · ${machine.priority ?? 'default priority'} · 1-min load average ` +
      `${load[0].toFixed(2)} before, ${load[1].toFixed(2)} after · ${minutes.toFixed(1)} min`);
  out();
  const forwards = run.workloads.filter((w) => !isDecode(w) && !isModelRow(w));
  const steps = run.workloads.filter((w) => isDecode(w) && !isModelRow(w));
  const models = run.workloads.filter(isModelRow);
  if (forwards.length) {
    renderForwards({ ...run, workloads: forwards, engines: run.engines.filter((e) => e.rows.includes('W')) }, out);
  }
  if (steps.length) renderDecode({ ...run, workloads: steps, engines: run.engines.filter((e) => e.rows.includes('D')) }, out);
  if (models.length) renderModels({ ...run, workloads: models, engines: run.engines.filter((e) => e.rows.includes('M')) }, out);
  return `${lines.join('\n')}\n`;
}

// The forward workloads (W rows, issue 5).
// pagesOnly (run.mjs --pages-only): the browsers' rows and their output check alone.
function renderForwards({ machine, engines, workloads, results, longest, peaks, pagesOnly }, out) {
  const get = (engine, threads, id) => results[engine]?.[threads]?.[id];
  const oursOf = (family) => engines.find((e) => e.family === family && e.ours).name;
  const ratio = (engine, threads, id) => {
    const ours = get(oursOf(engine.family), threads, id);
    const peer = get(engine.name, threads, id);
    return ours?.medianMs && peer?.medianMs ? peer.medianMs / ours.medianMs : undefined;
  };
  out('Each cell: median ms of one forward · GFLOP/s (dense FLOPs, masked work counted) · ' +
      '×ratio = peer ms / ours ms at the same thread count (ours: mha-wasm for the WebAssembly ' +
      'peers, mha for the native ones; above 1 we are faster). Medians under ' +
      `${config.timing.secondProcessBelowMs} ms are the better of two processes.`);
  out();
  for (const w of workloads) out(`- ${describeWorkload(w)}`);
  out();

  const header = ['engine', 'threads', ...workloads.map((w) => w.id), 'W6 peak memory',
    'longest L=S (E=256, H=4, causal)'];
  out(`| ${header.join(' | ')} |`);
  out(`|${header.map(() => '---').join('|')}|`);
  const anyResult = (engine, key) => Object.values(results[engine] ?? {})
    .flatMap((byId) => Object.values(byId)).find((r) => r[key])?.[key];
  // A family with no results at all (a browser left out of --browsers) is left out.
  const measured = (family) => engines.some((e) => e.family === family && results[e.name]);
  const families = [...new Set(engines.map((e) => e.family))];
  for (const family of families.filter(measured)) {
    out(`| **${sectionTitle(engines, family)}** |${' |'.repeat(header.length - 1)}`);
    for (const engine of engines.filter((e) => e.family === family)) {
      for (const threads of [1, 2]) {
        const cells = [engine.name, String(threads)];
        for (const w of workloads) {
          const r = get(engine.name, threads, w.id);
          if (!engine.threads.includes(threads)) cells.push('n/a');
          else if (!r) cells.push('');
          else if (r.error) cells.push(`failed: ${shortError(r.error)}`);
          else {
            let cell = `${fixed(r.medianMs, 2)} ms · ${fixed(r.gflops, 1)} GF/s`;
            const x = engine.ours ? undefined : ratio(engine, threads, w.id);
            if (x !== undefined) cell += ` · ×${x.toFixed(2)}`;
            if (r.check && !r.check.ok) cell += ` (output differs: ${r.check.maxAbs.toExponential(1)})`;
            cells.push(cell);
          }
        }
        const w6 = get(engine.name, threads, 'W6');
        if (!w6 || w6.error || engine.browser) cells.push('');
        else if (family === 'wasm') cells.push(`heap ${(w6.heapBytes / MiB).toFixed(0)} MiB`);
        else cells.push(`RSS ${(w6.maxRssBytes / MiB).toFixed(0)} MiB`);
        const search = longest?.[engine.name];
        if (family !== 'wasm' || !search || search.threads !== threads) cells.push('');
        else {
          const failed = search.attempts.find((a) => a.error);
          let cell = search.completed ? String(search.completed) : `none (from ${config.longest.from})`;
          if (search.completed === config.longest.to) cell += ' (the search stops there)';
          if (failed) cell += ` (${failed.n}: ${shortError(failed.error)})`;
          cells.push(cell);
        }
        out(`| ${cells.join(' | ')} |`);
      }
    }
  }
  out();
  if (measured('wasm')) {
    out('n/a: tfjs-backend-wasm turns its threads off in Node (its WASM_HAS_MULTITHREAD_SUPPORT ' +
        'flag is false there; forced on, it loads the threaded build but runs one thread).');
    out();
  }
  // Per browser measured: its version and the build mha-wasm chose there.
  const browsers = engines.filter((e) => e.browser && e.ours && measured(e.family)).map((e) => ({
    label: e.browser, version: anyResult(e.name, 'browser'), build: anyResult(e.name, 'info')?.build,
    oneThread: !e.threads.includes(2),
  }));
  if (browsers.length) {
    const versions = browsers.map((b) => `${b.version ?? `${b.label}, version unknown`}` +
      `${b.build ? `: build ${b.build}` : ''}`).join('; ');
    out(`In browsers (${versions}): the same engines, inputs, timing rule and output check on a ` +
        'cross-origin isolated page (COOP/COEP, bench/browser), one fresh browser per measurement at ' +
        'the run\'s priority, each loaded from the page\'s main thread as a page would: mha-wasm with ' +
        '`loadMHA({ threads })` (proxy \'auto\': the engine runs in the package\'s worker), ' +
        'onnxruntime-web with its defaults (on the main thread).' +
        browsers.filter((b) => b.oneThread).map((b) => ` ${b.label} as shipped has no SharedArrayBuffer: ` +
          'one thread only (n/a at 2).').join(''));
    out();
  }
  if (!pagesOnly) {
    out('Memory: WebAssembly engines report the size of their WebAssembly heap after W6 (the peak: ' +
        'it never shrinks); native engines the peak RSS of the process that ran W6 (runtime ' +
        'included). The longest-sequence search doubles L = S from ' +
        `${config.longest.from} up to ${config.longest.to}, one forward per length in a fresh ` +
        `process capped at ${config.longest.timeLimitSeconds} s, inside WebAssembly's 4 GiB limit.`);
    out();
  }

  const torch = anyResult('pytorch', 'torch');
  const info = anyResult('mha-wasm', 'info');
  out(`Versions: ${machine.peers.join(', ')}` +
      (torch ? `, PyTorch ${torch} on ${anyResult('pytorch', 'blas')}` : '') +
      (info ? `; mha-wasm ${info.version} (${info.build}, ${info.target ?? 'target unknown'}` +
        `${info.gemmTile ? `, GEMM tile ${info.gemmTile}` : ''})` : '') +
      browsers.filter((b) => b.build).map((b) => `, in ${b.label} ${b.build}`).join('') +
      (anyResult('mha', 'target') ? `; mha on Highway target ${anyResult('mha', 'target')}` +
        (anyResult('mha', 'gemmTile') ? `, GEMM tile ${anyResult('mha', 'gemmTile')}` : '') : '') + '.');
  out();

  out('## Outputs');
  out();
  const { checked, mismatches } = outputChecks(engines, workloads, get);
  out(checked === 0
    ? 'Not checked: PyTorch did not run.'
    : `${checked} outputs compared with PyTorch's (1 thread), tolerance 1e-4 abs or 1e-3 rel: ` +
      (mismatches.length ? `differ: ${mismatches.join('; ')}.` : 'all agree.'));
  out();
  if (pagesOnly) return;

  out('## SIMD limit');
  out();
  const gemm = config.gemm;
  const gemmNote = `forward with B=${gemm.B} L=${gemm.L} S=${gemm.S} E=${gemm.E}: ` +
    'almost all of its FLOPs are the Q and output projections';
  for (const [family, peakName] of [['wasm', 'WebAssembly f32x4 mul+add'], ['native', 'native FMA']]) {
    const familyPeaks = peaks[family];
    for (const threads of [1, 2]) {
      const peak = familyPeaks[threads];
      const probe = get(oursOf(family), threads, gemm.id);
      let line = `- ${peakName} peak, ${threads} thread${threads > 1 ? 's' : ''}: `;
      line += peak?.gflops ? `${fixed(peak.gflops, 1)} GF/s${peak.target ? ` (${peak.target})` : ''}` : `not measured${peak?.error ? ` (${peak.error})` : ''}`;
      line += `; ${oursOf(family)} projection GEMM probe: `;
      if (probe?.gflops) {
        line += `${fixed(probe.gflops, 1)} GF/s`;
        if (peak?.gflops) line += ` = ${((100 * probe.gflops) / peak.gflops).toFixed(0)}% of the peak`;
      } else line += probe?.error ? `failed (${probe.error})` : 'not measured';
      out(line);
    }
  }
  out(`- GEMM probe: ${gemmNote}. The peaks are independent mul+add (WebAssembly has no FMA ` +
      'in SIMD128) or FMA chains on every thread at once (bench/peak, bench/native/fma_peak.cc).');
  out();

  out('## Where our time goes (1 thread, estimated)');
  out();
  out('Projection time = projection FLOPs at the GEMM probe\'s rate; attention = the rest, ' +
      'with its rate over the FLOPs the masks leave (4·E per query-key pair attended) and that ' +
      'rate\'s share of the 1-thread peak (WebAssembly: f32x4 mul+add; native: FMA).');
  out();
  out('| engine | workload | forward ms | projections ms | attention ms | attention GF/s | % of peak |');
  out('|---|---|---|---|---|---|---|');
  for (const family of ['wasm', 'native']) {
    const ours = oursOf(family);
    const probe = get(ours, 1, gemm.id)?.gflops;
    const peak = peaks[family][1]?.gflops;
    for (const w of workloads) {
      const r = get(ours, 1, w.id);
      if (!probe || !r?.medianMs) continue;
      const estimate = attentionEstimate(w, r.medianMs, probe);
      const attention = estimate
        ? [fixed(estimate.ms, 2), fixed(estimate.gflops, 1),
           peak ? `${((100 * estimate.gflops) / peak).toFixed(0)}%` : '—']
        : ['— (projection-bound)', '—', '—'];
      out(`| ${ours} | ${w.id} | ${fixed(r.medianMs, 2)} | ${fixed(projectionFlops(w) / (probe * 1e6), 2)} | ` +
          `${attention.join(' | ')} |`);
    }
  }
  out();

  out('## Targets (issue 14, and issue 5 where 14 sets none)');
  out();
  const targets = evaluateTargets(get, longest, peaks);
  for (const target of targets.filter((t) => t.value !== undefined)) {
    out(`- ${target.met ? 'met' : 'NOT met'}: ${target.name}: ${target.value.toFixed(2)} (target ${target.goal})`);
  }
  const unmeasured = targets.filter((t) => t.value === undefined).map((t) => t.name);
  if (unmeasured.length) out(`- not measured in this run: ${unmeasured.join('; ')}`);
  out();
}

function projectionFlops({ B, L, S, E }) {
  return 2 * B * (2 * L * E * E + 2 * S * E * E);
}

// Attention FLOPs over the query-key pairs the masks leave.
function attendedFlops(w) {
  let pairs = 0;
  for (let b = 0; b < w.B; b++) {
    const keys = w.kpmLengths ? w.kpmLengths[b] : w.S;
    for (let i = 0; i < w.L; i++) pairs += w.causal ? Math.min(i + 1, keys) : keys;
  }
  return 4 * w.E * pairs;
}

// Attention time = forward minus projection FLOPs at the GEMM probe's rate,
// and its rate over the attended FLOPs; undefined below 30 % of the forward,
// where the estimate is noise (small GEMMs run at their own rate).
function attentionEstimate(w, medianMs, probeGflops) {
  const ms = medianMs - projectionFlops(w) / (probeGflops * 1e6);
  return ms < 0.3 * medianMs ? undefined : { ms, gflops: attendedFlops(w) / (ms * 1e6) };
}

function evaluateTargets(get, longest, peaks) {
  const targets = [];
  const ratioOf = (peer, ours, threads, id) => {
    const p = get(peer, threads, id);
    const o = get(ours, threads, id);
    return p?.medianMs && o?.medianMs ? p.medianMs / o.medianMs : undefined;
  };
  const atLeast = (name, value, goal) =>
    targets.push({ name, value, goal: `>= ${goal}`, met: value >= goal });
  // Issue 14.
  const ratios = { W1: 1.5, W4: 1.5, W3: 1.8, W2: 2.2, W6: 3.5 };
  for (const [id, goal] of Object.entries(ratios)) {
    atLeast(`WASM 2 threads, onnxruntime-web/mha-wasm on ${id}`, ratioOf('onnxruntime-web', 'mha-wasm', 2, id), goal);
  }
  for (const id of Object.keys(ratios)) {
    const node = ratioOf('onnxruntime-web', 'mha-wasm', 2, id);
    const page = ratioOf('onnxruntime-web in Chromium', 'mha-wasm in Chromium', 2, id);
    const both = page && node ? ` (×${page.toFixed(2)} in Chromium, ×${node.toFixed(2)} in Node)` : '';
    atLeast(`WASM 2 threads, onnxruntime-web/mha-wasm on ${id} in Chromium over the same in Node${both}`,
      page && node && page / node, 0.9);
  }
  for (const [family, ours, peakName] of [['wasm', 'mha-wasm', 'mul+add'], ['native', 'mha', 'FMA']]) {
    const probe = get(ours, 1, 'GEMM')?.gflops;
    const peak = peaks[family][1]?.gflops;
    atLeast(`${family === 'wasm' ? 'WASM' : 'native'} projection GEMM, share of the 1-thread ${peakName} peak`,
      probe && peak && probe / peak, 0.9);
    if (family !== 'wasm') continue;
    for (const id of ['W2', 'W6']) {
      const w = config.workloads.find((x) => x.id === id);
      const r = get(ours, 1, id);
      const estimate = probe && r?.medianMs && attentionEstimate(w, r.medianMs, probe);
      atLeast(`WASM attention on ${id} (estimated), share of the 1-thread mul+add peak`,
        estimate && peak && estimate.gflops / peak, 0.75);
    }
  }
  for (const threads of [1, 2]) {
    for (const id of ['W1', 'W3', 'W4']) {
      atLeast(`native ${threads} thread(s), onnxruntime-node/mha on ${id}`, ratioOf('onnxruntime-node', 'mha', threads, id), 1.2);
    }
    atLeast(`native ${threads} thread(s), onnxruntime-node/mha on W2`, ratioOf('onnxruntime-node', 'mha', threads, 'W2'), 2);
  }
  // Issue 5's that issue 14 does not replace.
  const heap = get('mha-wasm', 2, 'W6')?.heapBytes;
  targets.push({ name: 'mha-wasm W6 peak heap, MiB', value: heap && heap / MiB, goal: '<= 128',
    met: heap / MiB <= 128 });
  atLeast('longest L=S mha-wasm completes', longest?.['mha-wasm']?.completed ?? undefined, 131072);
  for (const id of ['W2', 'W6']) {
    const one = get('mha-wasm', 1, id)?.medianMs;
    const two = get('mha-wasm', 2, id)?.medianMs;
    atLeast(`mha-wasm speed-up of 2 threads over 1 on ${id}`, one && two && one / two, 1.85);
  }
  for (const threads of [1, 2]) {
    for (const w of config.workloads) {
      const x = ratioOf('pytorch', 'mha', threads, w.id);
      targets.push({ name: `native ${threads} thread(s), pytorch/mha on ${w.id}`, value: x,
        goal: '> 1', met: x > 1 });
    }
  }
  return targets;
}

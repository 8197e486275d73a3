// The decoding section of the report (D rows, issue 12): the step table,
// bandwidth use, the 16-bit caches, memory, outputs and the issue's targets.
import { cacheBytes, headDim, stepBytes, weightBytes } from './decode.mjs';
import { MiB, baseRatio, describeOptions, fixed, formatMs, outputChecks, sectionTitle, shortError } from './format.mjs';

const MB = 1e6;
const BANDWIDTH_ROWS = ['D1', 'D1h', 'D1b', 'D1w', 'D1q', 'D2', 'D2h', 'D2b', 'D2w', 'D2q'];

export function describeStep(w) {
  const kind = w.cross ? 'cross-attention' : `self-attention${w.causal ? ', causal' : ''}`;
  const heads = w.kvHeads !== w.H ? `, ${w.kvHeads} KV heads` : '';
  const rotary = w.rotary ? `, rotary (dim ${w.rotary.dim}, base ${w.rotary.base})` : '';
  const step = w.cross
    ? `1 query against ${w.past} encoder keys appended once`
    : `${w.L} token${w.L > 1 ? 's' : ''} against a cache of ${w.past} keys`;
  return `${w.id}: E=${w.E} H=${w.H}${heads} (head dim ${headDim(w)})${rotary}${describeOptions(w)}, ${kind}: ${step}; ` +
    `${w.dtype} cache, ${w.weights ?? 'float32'} weights; a step reads ${fixed(weightBytes(w) / MB, 1)} MB of weights + ` +
    `${fixed((stepBytes(w) - weightBytes(w)) / MB, 1)} MB of cache`;
}

// pagesOnly (run.mjs --pages-only): the browsers' rows and their output check alone.
export function renderDecode({ machine, engines, workloads, results, bandwidths, pagesOnly }, out) {
  const get = (engine, threads, id) => results[engine]?.[threads]?.[id];
  const oursOf = (family) => engines.find((e) => e.family === family && e.ours).name;
  const ratio = (name, ours, threads, id) => {
    const peer = get(name, threads, id);
    const our = get(ours, threads, id);
    return peer?.medianMs && our?.medianMs ? peer.medianMs / our.medianMs : undefined;
  };
  // Bytes a step must read / its time, as a share of the read bandwidth at the same thread count.
  const bandwidthShare = (family, threads, id) => {
    const r = get(oursOf(family), threads, id);
    const w = workloads.find((x) => x.id === id);
    const gbps = bandwidths?.[family]?.[threads]?.gbps;
    if (!r?.medianMs || !w || !gbps) return undefined;
    const achieved = stepBytes(w) / (r.medianMs * 1e6);
    return { achieved, share: achieved / gbps };
  };

  out('## Decoding (issue 12)');
  out();
  out('Each cell: median time of one decoding step · ×ratio = that engine\'s time / ours at the same ' +
      'thread count (ours: mha-wasm for the WebAssembly rows, mha for the native ones; above 1 we are ' +
      'faster; for "no cache", what the cache saves) · for ours on D1 and D2: the bytes the step must ' +
      'read (weights + cache) / its time as a share of the read bandwidth measured below at the same ' +
      'thread count. A step rolls the cache back to its past length (`truncate`) and takes the step ' +
      'again; onnxruntime gets the cache as past_key/past_value and returns present = past + new. ' +
      '"no cache": one forward of the step\'s queries against every source row, projected again (the ' +
      'API before the cache). Medians under 200 ms are the better of two processes.');
  out();
  for (const w of workloads) out(`- ${describeStep(w)}`);
  out();
  const header = ['engine', 'threads', ...workloads.map((w) => w.id)];
  out(`| ${header.join(' | ')} |`);
  out(`|${header.map(() => '---').join('|')}|`);
  const outputsSection = () => {
    out('### Outputs');
    out();
    const { checked, mismatches, skipped } = outputChecks(engines, workloads, get);
    out(`${checked} outputs compared with the float64 reference of bench/export_decode.py (explicit torch ` +
        'code: projections, rotary, grouped heads, causal softmax), tolerance 1e-4 abs or 1e-3 rel ' +
        '(float16 cache: 1e-3 abs or 1e-2 rel): ' +
        (mismatches.length ? `differ: ${mismatches.join('; ')}.` : 'all agree.') +
        (skipped.length ? ` Not compared: ${skipped.join('; ')}.` : ''));
    out();
  };
  const found = (engine, key) => Object.values(results[engine] ?? {})
    .flatMap((byId) => Object.values(byId)).find((r) => r[key])?.[key];
  // Node's WebAssembly rows, then each browser's page rows that ran, then native.
  const pages = [...new Set(engines.filter((e) => e.browser && results[e.name]).map((e) => e.family))];
  for (const family of pagesOnly ? pages : ['wasm', ...pages, 'native']) {
    out(`| **${sectionTitle(engines, family)}** |${' |'.repeat(header.length - 1)}`);
    const ours = oursOf(family);
    for (const engine of engines.filter((e) => e.family === family)) {
      for (const threads of engine.threads) {
        const cells = [engine.name, String(threads)];
        for (const w of workloads) {
          const r = get(engine.name, threads, w.id);
          if (!r) cells.push(w.model && !engine.ours ? 'n/a' : '');
          else if (r.error) cells.push(`failed: ${shortError(r.error)}`);
          else {
            let cell = formatMs(r.medianMs);
            const x = engine.ours ? undefined : ratio(engine.name, ours, threads, w.id);
            if (x !== undefined) cell += ` · ×${fixed(x, 2)}`;
            const bw = engine.ours && BANDWIDTH_ROWS.includes(w.id) ? bandwidthShare(family, threads, w.id) : undefined;
            if (bw) cell += ` · ${(100 * bw.share).toFixed(0)}% bw`;
            if (r.check && !r.check.ok) cell += ` (output differs: ${r.check.maxAbs.toExponential(1)})`;
            cells.push(cell);
          }
        }
        out(`| ${cells.join(' | ')} |`);
      }
    }
  }
  out();
  out('n/a: the 16-bit caches (D1h, D1b: float16, bfloat16; D2h, D2b) and the bfloat16 and int8 weights (D1w, D1q, D2w, D2q) are ours only.');
  out();
  if (pages.length) {
    const tick = (family) => found(oursOf(family), 'timerTickMs');
    const versions = pages.map((family) => `${found(oursOf(family), 'browser') ?? family}` +
      `${tick(family) ? `: ${fixed(tick(family) * 1000, 1)} µs` : ''}`).join('; ');
    out('In browsers: the same steps on the page of the W rows (bench/browser), mha-wasm through the ' +
        'package\'s proxy, onnxruntime-web on the page\'s main thread, timed with performance.now(), ' +
        `which browsers coarsen (its step on the isolated page: ${versions}).`);
    out();
  }
  const info = found(oursOf('wasm'), 'info');
  const target = found(oursOf('native'), 'target');
  out(`Versions: ${machine.peers.filter((p) => p.startsWith('onnxruntime')).join(', ')}` +
      (info ? `; mha-wasm ${info.version} (${info.build})` : '') +
      (target ? `; mha on Highway target ${target}` : '') + '.');
  out();

  renderPrecisions({ engines, workloads, pages, get }, out);
  if (pagesOnly) {
    outputsSection();
    return;
  }
  out('### Read bandwidth');
  out();
  for (const family of ['wasm', 'native']) {
    const probes = bandwidths?.[family] ?? {};
    const cells = [1, 2].map((t) => `${t} thread${t > 1 ? 's' : ''} ${probes[t]?.gbps ? `${fixed(probes[t].gbps, 1)} GB/s` : `not measured${probes[t]?.error ? ` (${probes[t].error})` : ''}`}`);
    const per = probes[1]?.bytes ? ` (${probes[1].bytes / MiB} MiB per thread)` : '';
    out(`- ${family === 'wasm' ? 'WebAssembly in Node (f32x4 loads, bench/peak/read_bandwidth.c)' : `native (Highway loads${probes[1]?.target ? `, ${probes[1].target}` : ''}, bench/native/read_bandwidth.cc)`}${per}: ${cells.join(', ')}`);
  }
  out('- Each thread sums its own buffer, far larger than the last-level cache; best of 5 passes, best of ' +
      '3 processes. Bytes a step must read: every weight once and every cached key and value once. ' +
      'D1\'s fit in a large last-level cache, so its share may pass 100%; D2\'s do not.');
  out();
  const bandwidthRows = BANDWIDTH_ROWS.filter((id) => workloads.some((w) => w.id === id));
  if (bandwidthRows.length) {
    out(`| engine | threads | ${bandwidthRows.map((id) => `${id} GB/s (share)`).join(' | ')} |`);
    out(`|---|---|${bandwidthRows.map(() => '---|').join('')}`);
    for (const family of ['wasm', 'native']) {
      for (const threads of [1, 2]) {
        const cells = bandwidthRows.map((id) => {
          const bw = bandwidthShare(family, threads, id);
          return bw ? `${fixed(bw.achieved, 1)} (${(100 * bw.share).toFixed(0)}%)` : '';
        });
        out(`| ${oursOf(family)} | ${threads} | ${cells.join(' | ')} |`);
      }
    }
    out();
  }

  out('### Memory');
  out();
  const wasm = oursOf('wasm');
  const memoryLines = [];
  for (const w of workloads) {
    const memory = [1, 2].map((t) => get(wasm, t, w.id)?.memory).find(Boolean);
    if (!memory) continue;
    memoryLines.push(`- ${w.id}: the cache (maxLength ${w.past + (w.cross ? 0 : w.L)}, ${w.dtype}) took ` +
        `${memory.cacheBytes} bytes of the WebAssembly heap; keys and values need ${memory.expectedBytes} ` +
        `(${(memory.cacheBytes / memory.expectedBytes).toFixed(4)}x)` +
        (memory.moduleBytes ? `; the module's ${w.weights ?? 'float32'} weights (mha.memory) ${memory.moduleBytes} ` +
          `bytes, ${(memory.moduleBytes / memory.expectedModuleBytes).toFixed(4)}x the ${memory.expectedModuleBytes} ` +
          'its parameters take in that dtype' : ''));
  }
  for (const w of workloads) {
    for (const threads of [1, 2]) {
      const soak = get(wasm, threads, w.id)?.soak;
      if (!soak) continue;
      const { warm, end } = soak;
      memoryLines.push(`- ${w.id}, ${threads} thread${threads > 1 ? 's' : ''}: ${soak.steps} steps after a ` +
          `warm-up: malloc bytes in use ${warm.inUseBytes} -> ${end.inUseBytes}, heap top ${warm.heapTop} -> ` +
          `${end.heapTop}, WebAssembly memory ${warm.memoryBytes / MiB} -> ${end.memoryBytes / MiB} MiB`);
    }
  }
  memoryLines.forEach((line) => out(line));
  if (!memoryLines.length) out(`- not measured: ${wasm} ran no decoding step`);
  out();

  outputsSection();
  out('## Targets of issue 12');
  out();
  const targets = decodeTargets(get, workloads, bandwidthShare);
  for (const t of targets.filter((x) => x.value !== undefined)) {
    out(`- ${t.met ? 'met' : 'NOT met'}: ${t.name}: ${t.format(t.value)} (target ${t.goal})`);
  }
  const unmeasured = targets.filter((t) => t.value === undefined).map((t) => t.name);
  if (unmeasured.length) out(`- not measured in this run: ${unmeasured.join('; ')}`);
  out();
}

// Issue 24's table: each row of another precision (a "base" in workloads.json) over its float32
// row, for ours in Node, in each browser that ran and natively.
function renderPrecisions({ engines, workloads, pages, get }, out) {
  const rows = workloads.filter((w) => w.base);
  const columns = ['wasm', ...pages, 'native'].map((family) => engines.find((e) => e.family === family && e.ours))
    .flatMap((engine) => engine.threads.map((threads) => ({ engine: engine.name, threads })))
    .filter(({ engine, threads }) => rows.some((w) => get(engine, threads, w.id)));
  if (!rows.length || !columns.length) return;
  out('### Precisions against float32 (issue 24)');
  out();
  out('Each cell: the step with the row\'s weights and cache / the same step in float32 (its base row, D1 ' +
      'or D2) at the same thread count, the median of the ratios of pairs timed in alternation in one ' +
      'process (two modules; bench/lib/timing.mjs measurePair, natively bench/native/decode_bench.cc) · the ' +
      'step\'s median / its float32 pair\'s. Without pairs (an older run\'s results), the two rows\' medians.');
  out();
  out(`| row | weights | cache | ${columns.map(({ engine, threads }) => `${engine} ${threads}`).join(' | ')} |`);
  out(`|---|---|---|${columns.map(() => '---|').join('')}`);
  for (const w of rows) {
    const cells = columns.map(({ engine, threads }) => {
      const r = get(engine, threads, w.id);
      const x = baseRatio(get, engine, threads, w);
      if (r?.error) return `failed: ${shortError(r.error)}`;
      if (!x) return '';
      const base = r.baseMedianMs ?? get(engine, threads, w.base)?.medianMs;
      return `×${x.toFixed(2)} · ${formatMs(r.medianMs)} / ${formatMs(base)}`;
    });
    out(`| ${w.id} | ${w.weights ?? 'float32'} | ${w.dtype} | ${cells.join(' | ')} |`);
  }
  out();
}

function decodeTargets(get, workloads, bandwidthShare) {
  const targets = [];
  const two = (value) => value.toFixed(2);
  const add = (name, value, goal, met, format = two) => targets.push({ name, value, goal, met, format });
  const findRow = (id) => workloads.find((w) => w.id === id) ?? { id };
  const ms = (engine, threads, id) => get(engine, threads, id)?.medianMs;
  const ratio = (peer, ours, threads, id) => {
    const p = ms(peer, threads, id);
    const o = ms(ours, threads, id);
    return p && o ? p / o : undefined;
  };
  for (const threads of [1, 2]) {
    for (const [id, goal] of [['D1', 3], ['D2', 3], ['D4', 3], ['D3', 1.5]]) {
      const x = ratio('onnxruntime-web', 'mha-wasm', threads, id);
      add(`WASM ${threads} thread(s), onnxruntime-web/mha-wasm on ${id}`, x, `>= ${goal}`, x >= goal);
    }
  }
  for (const [threads, goal] of [[1, 15], [2, 20]]) {
    const t = ms('mha-wasm', threads, 'D5');
    add(`WASM ${threads} thread(s), mha-wasm D5 step, µs`, t && t * 1000, `<= ${goal}`, t * 1000 <= goal,
      (v) => v.toFixed(1));
  }
  const percent = (v) => `${(100 * v).toFixed(0)}%`;
  for (const family of ['wasm', 'native']) {
    for (const threads of [1, 2]) {
      for (const id of ['D1', 'D2']) {
        const share = bandwidthShare(family, threads, id)?.share;
        add(`${family === 'wasm' ? 'WASM' : 'native'} ${threads} thread(s), ${id} bytes/time as a share of ` +
            'the read bandwidth', share, '>= 60%', share >= 0.6, percent);
      }
    }
  }
  for (const [ours, label] of [['mha-wasm', 'WASM'], ['mha', 'native']]) {
    for (const threads of [1, 2]) {
      // Issue 24: a float16 or bfloat16 cache <= 0.9x of float32.
      for (const [id, dtype] of [['D2h', 'float16'], ['D2b', 'bfloat16']]) {
        const x = baseRatio(get, ours, threads, findRow(id));
        add(`${label} ${threads} thread(s), ${ours} D2 with a ${dtype} cache / float32`, x, '<= 0.9', x <= 0.9);
      }
    }
  }
  // Issue 24: weights kept in fewer bytes, at 1 thread.
  for (const [ours, label] of [['mha-wasm', 'WASM'], ['mha', 'native']]) {
    for (const [id, weights, goal] of [['D2w', 'bfloat16', 0.6], ['D2q', 'int8', 0.4]]) {
      const x = baseRatio(get, ours, 1, findRow(id));
      add(`${label} 1 thread, ${ours} D2 with ${weights} weights / float32`, x, `<= ${goal}`, x <= goal);
    }
  }
  for (const w of workloads) {
    const memory = [1, 2].map((t) => get('mha-wasm', t, w.id)?.memory).find((m) => m?.moduleBytes);
    const x = memory && memory.moduleBytes / memory.expectedModuleBytes;
    add(`${w.id} mha.memory / its ${w.weights ?? 'float32'} parameters' bytes`, x, '<= 1.01', x <= 1.01,
      (v) => v.toFixed(4));
  }
  for (const threads of [1, 2]) {
    for (const id of ['D1', 'D2']) {
      const x = ratio('onnxruntime-node', 'mha', threads, id);
      add(`native ${threads} thread(s), onnxruntime-node/mha on ${id}`, x, '>= 2', x >= 2);
    }
  }
  // A cache takes what maxLength says: keys and values, plus at most a page of bookkeeping.
  for (const w of workloads) {
    const memory = [1, 2].map((t) => get('mha-wasm', t, w.id)?.memory).find(Boolean);
    const extra = memory && memory.cacheBytes - memory.expectedBytes;
    add(`${w.id} cache heap bytes beyond its keys and values (maxLength ${w.past + (w.cross ? 0 : w.L)}: ` +
        `${cacheBytes(w, w.past + (w.cross ? 0 : w.L))} bytes)`, extra, '0 to 4096',
    extra >= 0 && extra <= 4096, String);
  }
  for (const w of workloads.filter((x) => x.soakSteps)) {
    for (const threads of [1, 2]) {
      const soak = get('mha-wasm', threads, w.id)?.soak;
      const growth = soak && (soak.end.inUseBytes - soak.warm.inUseBytes) + (soak.end.heapTop - soak.warm.heapTop)
        + (soak.end.memoryBytes - soak.warm.memoryBytes);
      add(`WASM ${threads} thread(s), heap growth over ${w.soakSteps} ${w.id} steps, bytes (malloc, heap top, memory)`,
        growth, '0', growth === 0, String);
    }
  }
  return targets;
}

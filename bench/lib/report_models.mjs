// The section of issue 22's rows ("models" in workloads.json): V1 and V2
// (a sliding window, soft-capping) against onnxruntime's GroupQueryAttention,
// V3 (a window's cost grows with W, not L) and the cost of each option over
// the same forward without it; the issue's targets, met or not.
import { isDecode } from './decode.mjs';
import { describeStep } from './report_decode.mjs';
import { MiB, baseRatio, describeOptions, describeWorkload, fixed, formatMs, outputChecks, sectionTitle, shortError } from './format.mjs';

const PEER_TARGETS = [['V1', 3], ['V2', 3], ['V1f', 2]];
const V3 = ['V3a', 'V3b', 'V3c'];
const OPTION_COST_LIMIT = 1.1;
const PER_TOKEN_LIMIT = 1.3;

export function renderModels({ engines, workloads, results }, out) {
  const get = (engine, threads, id) => results[engine]?.[threads]?.[id];
  const ms = (engine, threads, id) => get(engine, threads, id)?.medianMs;
  const oursOf = (family) => engines.find((e) => e.family === family && e.ours).name;
  const ratio = (a, b) => (a && b ? a / b : undefined);
  const cost = (ours, threads, w) => baseRatio(get, ours, threads, w);
  const steps = workloads.filter(isDecode);
  const v3 = workloads.filter((w) => V3.includes(w.id));
  const options = workloads.filter((w) => w.base);

  out('## Today\'s models: windows, soft-capping, ALiBi, sinks (issue 22)');
  out();
  out('V1 and V2 against onnxruntime\'s GroupQueryAttention (`local_window_size` = W: in onnxruntime 1.30 ' +
      'it sees the query\'s key and the W - 1 before, as ours; `softcap`; `do_rotary`), models and float64 references from ' +
      'bench/export_decode.py, timed as the D rows. V3 and the option rows are ours only (the parameters ' +
      'of W6 or W3, one forward, timed as the W rows).');
  out();
  for (const w of workloads) out(`- ${isDecode(w) ? describeStep(w) : describeWorkload(w)}`);
  out();
  if (steps.length) {
    const header = ['engine', 'threads', ...steps.map((w) => w.id)];
    out(`| ${header.join(' | ')} |`);
    out(`|${header.map(() => '---').join('|')}|`);
    for (const family of ['wasm', 'native']) {
      out(`| **${sectionTitle(engines, family)}** |${' |'.repeat(header.length - 1)}`);
      for (const engine of engines.filter((e) => e.family === family)) {
        for (const threads of engine.threads) {
          const cells = steps.map((w) => {
            const r = get(engine.name, threads, w.id);
            if (!r) return '';
            if (r.error) return `failed: ${shortError(r.error)}`;
            const x = engine.ours ? undefined : ratio(r.medianMs, ms(oursOf(family), threads, w.id));
            return formatMs(r.medianMs) + (x ? ` · ×${fixed(x, 2)}` : '') +
              (r.check && !r.check.ok ? ` (output differs: ${r.check.maxAbs.toExponential(1)})` : '');
          });
          out(`| ${engine.name} | ${threads} | ${cells.join(' | ')} |`);
        }
      }
    }
    out();
    const { checked, mismatches } = outputChecks(engines, steps, get);
    out(`Outputs: ${checked} compared with the float64 reference (tolerance 1e-4 abs or 1e-3 rel): ` +
        `${mismatches.length ? `differ: ${mismatches.join('; ')}` : 'all agree'}.`);
    out();
  }
  if (v3.length) {
    out('V3: one forward at each L with the same window; µs per token and its ratio to the shortest L.');
    out();
    out(`| engine | threads | ${v3.map((w) => `${w.id} (L=${w.L})`).join(' | ')} | heap after ${v3.at(-1).id} |`);
    out(`|---|---|${v3.map(() => '---|').join('')}---|`);
    for (const family of ['wasm', 'native']) {
      const ours = oursOf(family);
      for (const threads of [1, 2]) {
        const perToken = (w) => ms(ours, threads, w.id) && (1000 * ms(ours, threads, w.id)) / w.L;
        const cells = v3.map((w) => {
          const r = get(ours, threads, w.id);
          if (!r || r.error) return r ? `failed: ${shortError(r.error)}` : '';
          return `${fixed(r.medianMs, 2)} ms · ${fixed(perToken(w), 2)} µs/token · ×${fixed(perToken(w) / perToken(v3[0]), 2)}`;
        });
        const last = get(ours, threads, v3.at(-1).id);
        const memory = !last?.medianMs ? '' : family === 'wasm' ? `heap ${(last.heapBytes / MiB).toFixed(0)} MiB`
          : `RSS ${(last.maxRssBytes / MiB).toFixed(0)} MiB`;
        out(`| ${ours} | ${threads} | ${cells.join(' | ')} | ${memory} |`);
      }
    }
    out();
  }
  if (options.length) {
    out('Option cost: the forward with the option / the same forward without it (its base row), at the ' +
        'same thread count; mha-wasm: the median of the ratios of pairs timed in alternation in one ' +
        'process (bench/lib/timing.mjs measurePair), mha: the ratio of the two rows\' medians. The window ' +
        'covers every key (W6: W = L with the causal mask; W3: [64, 64]), so it masks nothing and what it ' +
        'costs is its own work.');
    out();
    out('| option row | base | mha-wasm 1 | mha-wasm 2 | mha 1 | mha 2 |');
    out('|---|---|---|---|---|---|');
    for (const w of options) {
      const cells = ['mha-wasm', 'mha'].flatMap((ours) => [1, 2].map((threads) => {
        const x = cost(ours, threads, w);
        return x ? `×${x.toFixed(2)}` : '';
      }));
      out(`| ${w.id} (${describeOptions(w).slice(2)}) | ${w.base} | ${cells.join(' | ')} |`);
    }
    out();
  }

  out('### Targets of issue 22');
  out();
  const targets = [];
  const add = (name, value, goal, met) => targets.push({ name, value, goal, met });
  for (const threads of [1, 2]) {
    for (const [id, goal] of PEER_TARGETS) {
      const x = ratio(ms('onnxruntime-web', threads, id), ms('mha-wasm', threads, id));
      add(`WASM ${threads} thread(s), onnxruntime-web/mha-wasm on ${id}`, x, `>= ${goal}`, x >= goal);
    }
    const first = ms('mha-wasm', threads, V3[0]);
    const last = ms('mha-wasm', threads, V3.at(-1));
    const [a, c] = [V3[0], V3.at(-1)].map((id) => workloads.find((w) => w.id === id));
    const x = first && last && a && c ? (last / c.L) / (first / a.L) : undefined;
    add(`WASM ${threads} thread(s), mha-wasm per-token time ${V3.at(-1)} / ${V3[0]}`, x,
      `<= ${PER_TOKEN_LIMIT}`, x <= PER_TOKEN_LIMIT);
    for (const w of options) {
      const x = cost('mha-wasm', threads, w);
      add(`WASM ${threads} thread(s), mha-wasm ${w.id} / ${w.base}`, x, `<= ${OPTION_COST_LIMIT}`, x <= OPTION_COST_LIMIT);
    }
  }
  for (const t of targets.filter((x) => x.value !== undefined)) {
    out(`- ${t.met ? 'met' : 'NOT met'}: ${t.name}: ${t.value.toFixed(2)} (target ${t.goal})`);
  }
  const unmeasured = targets.filter((t) => t.value === undefined).map((t) => t.name);
  if (unmeasured.length) out(`- not measured in this run: ${unmeasured.join('; ')}`);
  out();
}

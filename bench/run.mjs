// `npm run bench`: every engine on every workload of bench/workloads.json,
// 1 and 2 threads, in this one run; prints one Markdown table (stdout) plus
// the memory, longest-sequence and SIMD-limit results and the issue's targets.
// Progress goes to stderr. Each measurement runs in a child process of its
// own with a time cap (bench/child.mjs, bench/browser/child.mjs,
// bench/native/mha_bench.cc, bench/torch_bench.py), so a failing peer is
// noted, never fatal.
//   node bench/run.mjs [workload ids...] [--no-longest] [--browsers=chromium,firefox,webkit] [--no-chromium]
//                      [--pages-only]
// --browsers picks the browsers of the page rows (default: chromium);
// --no-chromium leaves Chromium out of them; --pages-only runs them alone.
//   node bench/run.mjs --render   (the report of the last run again, from build/bench/results.json)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  BENCH_DIR, BUILD_DIR, DATA_DIR, ROOT_DIR, config, dataPath, findWorkload, flops, isModelRow, modelPath, readFloats,
  referencePath, sinksPath, timingOf, writeInputs,
} from './lib/workloads.mjs';
import { isDecode, noCacheNotCompared, tolerance } from './lib/decode.mjs';
import { renderReport } from './lib/report.mjs';
import { HAS_AVX512, PYTHON, ensureModels, log, raisePriority, runChild, torchEnv } from './lib/children.mjs';
import { BROWSERS } from '../tests/e2e/driver/browsers.mjs';
import { windowOption } from '../web/src/config.js';

const NATIVE_BUILD = path.join(BUILD_DIR, 'native');
const MHA_BENCH = path.join(NATIVE_BUILD, 'bench/native/mha_bench');
const DECODE_BENCH = path.join(NATIVE_BUILD, 'bench/native/decode_bench');
const FMA_PEAK = path.join(NATIVE_BUILD, 'bench/native/fma_peak');
const READ_BANDWIDTH = path.join(NATIVE_BUILD, 'bench/native/read_bandwidth');
const SIMD_PEAK_WASM = path.join(BUILD_DIR, 'simd_peak.wasm');
const READ_BANDWIDTH_WASM = path.join(BUILD_DIR, 'read_bandwidth.wasm');
const THREADS = [1, 2];

// The timing rule's key=value arguments of the native runners.
const timingArgs = (timing) => [
  `warmup_reps=${timing.warmupReps}`, `warmup_ms=${timing.warmupMs}`, `budget_ms=${timing.budgetMs}`,
  `min_reps=${timing.minReps}`, `max_reps=${timing.maxReps}`,
];

// key=value arguments of issue 22's options for mha_bench and decode_bench.
function optionArgs(w) {
  const { left, right } = windowOption(w.window);
  return [`window_left=${left}`, `window_right=${right}`, `softcap=${w.softcap ?? 0}`, `alibi=${+Boolean(w.alibi)}`,
    ...(w.sinks ? [`sinks=${sinksPath(w)}`] : [])];
}

// key=value arguments of mha_bench and torch_bench.py.
function nativeArgs(w, threads, runner) {
  return [
    `params=${modelPath(w, 'safetensors')}`, `data=${path.join(DATA_DIR, w.id)}`,
    `out=${dataPath(w.id, `${runner}-${threads}.out.f32`)}`,
    `B=${w.B}`, `L=${w.L}`, `S=${w.S}`, `E=${w.E}`, `H=${w.H}`, `cross=${+w.cross}`,
    `causal=${+w.causal}`, `need_weights=${+w.needWeights}`, `kpm=${+Boolean(w.kpmLengths)}`,
    `threads=${threads}`, ...timingArgs(timingOf(w)),
  ];
}

// key=value arguments of decode_bench (a D row, with or without a cache; a
// precision row with its float32 base row's, timed in alternation).
function decodeArgs(w, threads, runner, cache) {
  const base = w.base && findWorkload(w.base);
  return [
    `params=${modelPath(w, 'safetensors')}`, `data=${path.join(DATA_DIR, w.id)}`,
    `out=${dataPath(w.id, `${runner}-${threads}.out.f32`)}`,
    `E=${w.E}`, `H=${w.H}`, `kv_heads=${w.kvHeads}`, `past=${w.past}`, `L=${w.L}`,
    `cross=${+w.cross}`, `causal=${+w.causal}`, `bias=${+w.bias}`,
    `rotary_dim=${w.rotary?.dim ?? 0}`, `rotary_base=${w.rotary?.base ?? 0}`, `dtype=${w.dtype}`,
    `weights=${w.weights ?? 'float32'}`, `cache=${+cache}`, `threads=${threads}`, ...timingArgs(timingOf(w)), ...optionArgs(w),
    ...(base ? [`base_dtype=${base.dtype}`, `base_weights=${base.weights ?? 'float32'}`] : []),
  ];
}

const jsChild = (name) => (w, threads) => runChild(process.execPath,
  [path.join(BENCH_DIR, 'child.mjs'), name, String(threads), w.id], { timeoutSeconds: timingOf(w).childTimeoutSeconds });

// The browsers of the page rows (tests/e2e/driver/browsers.mjs's names).
// WebKit as shipped has no SharedArrayBuffer: one thread.
const PAGE_BROWSERS = ['chromium', 'firefox', 'webkit'];

// A WebAssembly engine of the W and D rows on a cross-origin isolated page
// in `browser`, one fresh browser per measurement (bench/browser).
function inBrowser(browser, peer, ours = false) {
  const { label, sharedArrayBuffer } = BROWSERS[browser];
  const name = `${peer} in ${label}`;
  return {
    name, family: browser, browser: label, ours, rows: 'WD', threads: sharedArrayBuffer ? THREADS : [1],
    run: (w, threads) => runChild(process.execPath, [path.join(BENCH_DIR, 'browser/child.mjs'), peer,
      String(threads), w.id, dataPath(w.id, `${name}-${threads}.out.f32`), `--browser=${browser}`]),
  };
}

const nativeDecode = (cache) => (w, threads) => (fs.existsSync(DECODE_BENCH)
  ? runChild(DECODE_BENCH, decodeArgs(w, threads, cache ? 'mha' : 'mha no cache', cache))
  : { error: 'not built (see the cmake step above)' });

// family: which engine the ratio divides by (the `ours` of the same family).
// rows: which workloads an engine runs: W (forwards), D (decoding steps), M
// (issue 22's rows, "models" in workloads.json). A row with a "model" of
// another row's (the option rows) and a D row's dtype variants (16-bit
// caches) are ours only.
const ENGINES = [
  { name: 'mha-wasm', family: 'wasm', ours: true, rows: 'WDM', threads: THREADS, run: jsChild('mha-wasm') },
  { name: 'mha-wasm no cache', family: 'wasm', rows: 'D', baseline: true, threads: THREADS,
    run: jsChild('mha-wasm no cache') },
  { name: 'onnxruntime-web', family: 'wasm', rows: 'WDM', threads: THREADS, run: jsChild('onnxruntime-web') },
  // tfjs-backend-wasm turns its threads off in Node.
  { name: 'tfjs-wasm', family: 'wasm', rows: 'W', threads: [1], run: jsChild('tfjs-wasm') },
  ...PAGE_BROWSERS.flatMap((browser) => [inBrowser(browser, 'mha-wasm', true), inBrowser(browser, 'onnxruntime-web')]),
  {
    name: 'mha', family: 'native', ours: true, rows: 'WDM', threads: THREADS,
    run: (w, threads) => (isDecode(w) ? nativeDecode(true)(w, threads) : fs.existsSync(MHA_BENCH)
      ? runChild(MHA_BENCH, [...nativeArgs(w, threads, 'mha'), ...optionArgs(w)])
      : { error: 'not built (see the cmake step above)' }),
  },
  { name: 'mha no cache', family: 'native', rows: 'D', baseline: true, threads: THREADS,
    run: nativeDecode(false) },
  { name: 'onnxruntime-node', family: 'native', rows: 'WDM', threads: THREADS, run: jsChild('onnxruntime-node') },
  {
    name: 'pytorch', family: 'native', rows: 'W', threads: THREADS,
    run: (w, threads) => runChild(PYTHON, [path.join(BENCH_DIR, 'torch_bench.py'),
      ...nativeArgs(w, threads, 'pytorch')], { env: torchEnv(threads) }),
  },
];

// Whether `engine` runs workload `w`.
const runs = (engine, w) => engine.rows.includes(isModelRow(w) ? 'M' : isDecode(w) ? 'D' : 'W')
  && (!w.model || engine.ours);

function buildNative() {
  log('building the native benchmarks (cmake, build/bench/native)');
  const step = (args, what) => {
    const result = spawnSync('cmake', args, { stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
    if (result.status !== 0) {
      log(`native build of ${what} failed: ${result.stderr.trim().split('\n').slice(-3).join(' | ')}`);
    }
    return result.status === 0;
  };
  if (!step(['-S', ROOT_DIR, '-B', NATIVE_BUILD, '-DCMAKE_BUILD_TYPE=Release', '-DMHA_BUILD_TESTS=OFF',
    '-DMHA_BUILD_BENCH=ON'], 'the configuration')) return;
  // One target at a time: one that does not build leaves the others usable.
  for (const target of ['mha_bench', 'decode_bench', 'fma_peak', 'read_bandwidth']) {
    step(['--build', NATIVE_BUILD, '-j', String(os.availableParallelism()), '--target', target], target);
  }
}

// A standalone WebAssembly probe from bench/peak (emcc needs acorn from NODE_PATH).
function buildWasmProbe(source, output, exports, flags = []) {
  const result = spawnSync('emcc', ['-O3', '-msimd128', '--no-entry', '-sSTANDALONE_WASM', ...flags,
    `-sEXPORTED_FUNCTIONS=${exports.map((name) => `_${name}`).join(',')}`, '-o', output,
    path.join(BENCH_DIR, 'peak', source)], {
    env: { ...process.env, NODE_PATH: '/usr/share/nodejs' },
    encoding: 'utf8',
  });
  if (result.status !== 0) log(`emcc ${source} failed: ${(result.stderr ?? result.error).toString().trim()}`);
}

// Max |a - b| over the output, and whether it is within the tolerance
// (elementwise abs or rel of the reference; docs/design.md's: 1e-4, 1e-3).
function compareOutputs(reference, output, { abs, rel } = { abs: 1e-4, rel: 1e-3 }) {
  if (reference.length !== output.length) return { maxAbs: Infinity, ok: false };
  let maxAbs = 0;
  let ok = true;
  for (let i = 0; i < reference.length; i++) {
    const diff = Math.abs(reference[i] - output[i]);
    if (!(diff <= abs || diff <= rel * Math.abs(reference[i]))) ok = false;
    if (!(diff <= maxAbs)) maxAbs = diff;
  }
  return { maxAbs, ok };
}

// W rows: against PyTorch's output (1 thread); D rows: against the float64
// reference of bench/export_decode.py.
function checkOutputs(w, results) {
  const file = (engine, threads) => dataPath(w.id, `${engine}-${threads}.out.f32`);
  let reference = null;
  if (isDecode(w)) reference = readFloats(referencePath(w));
  else if (fs.existsSync(file('pytorch', 1)) && !results.pytorch?.[1]?.[w.id]?.error) {
    reference = readFloats(file('pytorch', 1));
  }
  if (!reference) return;
  for (const engine of ENGINES) {
    for (const threads of engine.threads) {
      const result = results[engine.name]?.[threads]?.[w.id];
      if (!result || result.error || !fs.existsSync(file(engine.name, threads))) continue;
      if (engine.baseline && noCacheNotCompared(w)) {
        result.notCompared = noCacheNotCompared(w);
        continue;
      }
      result.check = compareOutputs(reference, readFloats(file(engine.name, threads)),
        isDecode(w) ? tolerance(w) : undefined);
    }
  }
}

// Rows measured together, their processes interleaved: an option row with its
// base row (workloads.json "models"), so that the ratio of the two forwards
// does not carry what changed on the machine between them. Issue 22's forward
// rows (ours only, a cost ratio or a per-token ratio each) take the best of
// three processes; the others a second process when short.
const groupOf = (w) => w.base ?? w.id;
const processes = (w) => (isModelRow(w) && !isDecode(w) ? 3 : 2);

function measureWorkloads(workloads, results, engines = ENGINES) {
  const groups = new Map();
  for (const w of workloads) groups.set(groupOf(w), [...(groups.get(groupOf(w)) ?? []), w]);
  for (const group of groups.values()) {
    for (const w of group) {
      if (!isDecode(w)) writeInputs(w);  // export_decode.py wrote the D rows'
      // Outputs of an earlier run must not pass for this one's.
      for (const engine of engines) {
        for (const threads of engine.threads) fs.rmSync(dataPath(w.id, `${engine.name}-${threads}.out.f32`), { force: true });
      }
    }
    for (const threads of THREADS) {
      // Short runs vary from process to process (thread placement, page
      // layout): every engine gets a second process after the others' first,
      // and keeps its faster median.
      for (const pass of [1, 2, 3]) {
        for (const w of group.filter((x) => pass <= processes(x))) {
          const { secondProcessBelowMs } = timingOf(w);
          for (const engine of engines) {
            if (!engine.threads.includes(threads) || !runs(engine, w)) continue;
            const slot = ((results[engine.name] ??= {})[threads] ??= {});
            const previous = slot[w.id];
            if (pass > 1 && processes(w) === 2 && !(previous?.medianMs < secondProcessBelowMs)) continue;
            const result = engine.run(w, threads);
            if (!isDecode(w)) result.gflops = result.error ? undefined : flops(w) / (result.medianMs * 1e6);
            if (!previous || previous.error || result.medianMs < previous.medianMs) slot[w.id] = result;
            log(`${w.id} ${engine.name} ${threads}t: ${result.error ?? `${result.medianMs.toFixed(3)} ms`}`);
          }
        }
      }
    }
    group.forEach((w) => checkOutputs(w, results));
  }
}

// Doubles L = S from config.longest.from while each WASM engine completes.
function longestSequence() {
  const { from, to, timeLimitSeconds } = config.longest;
  const longest = {};
  for (const engine of ENGINES.filter((e) => e.family === 'wasm' && e.rows.includes('W'))) {
    const threads = Math.max(...engine.threads);
    const entry = { threads, completed: null, attempts: [] };
    for (let n = from; n <= to; n *= 2) {
      const result = runChild(process.execPath,
        [path.join(BENCH_DIR, 'child.mjs'), engine.name, String(threads), `L${n}`],
        { timeoutSeconds: timeLimitSeconds });
      entry.attempts.push({ n, ...result });
      log(`longest ${engine.name} L=S=${n}: ${result.error ?? `${(result.medianMs / 1000).toFixed(1)} s`}`);
      if (result.error) break;
      entry.completed = n;
    }
    longest[engine.name] = entry;
  }
  return longest;
}

// The best of three tries: anything else running only lowers a peak.
const bestOfThree = (command, args, key) => [0, 1, 2].map(() => runChild(command, args))
  .reduce((a, b) => ((b[key] ?? 0) > (a[key] ?? 0) ? b : a));

function limits(results) {
  buildWasmProbe('simd_peak.c', SIMD_PEAK_WASM, ['simd_peak']);
  const peaks = { wasm: {}, native: {} };
  for (const threads of THREADS) {
    if (fs.existsSync(SIMD_PEAK_WASM)) {
      peaks.wasm[threads] = bestOfThree(process.execPath,
        [path.join(BENCH_DIR, 'peak/simd_peak.mjs'), SIMD_PEAK_WASM, String(threads)], 'gflops');
    }
    if (fs.existsSync(FMA_PEAK)) peaks.native[threads] = bestOfThree(FMA_PEAK, [`threads=${threads}`], 'gflops');
  }
  // The projection GEMM, probed through a forward whose attention is trivial.
  measureWorkloads([config.gemm], results, ENGINES.filter((e) => e.ours && !e.browser));
  return peaks;
}

// Read bandwidth (GB/s) of WebAssembly in Node and of native code, 1 and 2 threads.
function bandwidth() {
  const { mibPerThread, passes } = config.bandwidth;
  buildWasmProbe('read_bandwidth.c', READ_BANDWIDTH_WASM, ['read_setup', 'read_pass'],
    ['-sALLOW_MEMORY_GROWTH=1', '-sMAXIMUM_MEMORY=2GB']);
  const probes = { wasm: {}, native: {} };
  for (const threads of THREADS) {
    if (fs.existsSync(READ_BANDWIDTH_WASM)) {
      probes.wasm[threads] = bestOfThree(process.execPath, [path.join(BENCH_DIR, 'peak/read_bandwidth.mjs'),
        READ_BANDWIDTH_WASM, String(threads), String(mibPerThread), String(passes)], 'gbps');
    }
    if (fs.existsSync(READ_BANDWIDTH)) {
      probes.native[threads] = bestOfThree(READ_BANDWIDTH,
        [`threads=${threads}`, `mib=${mibPerThread}`, `passes=${passes}`], 'gbps');
    }
    log(`read bandwidth ${threads}t: WASM ${probes.wasm[threads]?.gbps?.toFixed(1)} GB/s, ` +
        `native ${probes.native[threads]?.gbps?.toFixed(1)} GB/s`);
  }
  return probes;
}

// The CPU as the run saw it: a virtual machine often names only the brand
// ("AMD EPYC"), so /proc/cpuinfo's family, model and stepping say which.
function cpuModel() {
  const cpuinfo = fs.readFileSync('/proc/cpuinfo', 'utf8');
  const field = (name) => new RegExp(`^${name}\\s*: (.*)$`, 'm').exec(cpuinfo)?.[1];
  const details = [`family ${field('cpu family')}, model ${field('model')}, stepping ${field('stepping')}`];
  if (HAS_AVX512) details.push('AVX-512');
  if (/^flags\s*:.* hypervisor/m.test(cpuinfo)) details.push('virtual machine');
  return `${os.cpus()[0]?.model ?? 'unknown CPU'} (${details.join('; ')})`;
}

function machine() {
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT_DIR, encoding: 'utf8' });
  const version = (name) => {
    const file = path.join(ROOT_DIR, 'node_modules', name, 'package.json');
    return fs.existsSync(file) ? JSON.parse(fs.readFileSync(file, 'utf8')).version : 'missing';
  };
  return {
    peers: ['onnxruntime-web', 'onnxruntime-node', '@tensorflow/tfjs-backend-wasm']
      .map((name) => `${name} ${version(name)}`),
    cpu: cpuModel(),
    cores: os.availableParallelism(),
    node: process.version,
    commit: git.stdout?.trim() || 'unknown',
    date: new Date().toISOString().replace(/\.\d+Z$/, 'Z'),
  };
}

// The browsers of --browsers=a,b (default chromium), without Chromium on --no-chromium.
function pageBrowsers(argv) {
  const list = argv.find((a) => a.startsWith('--browsers='))?.slice('--browsers='.length).split(',').filter(Boolean)
    ?? ['chromium'];
  for (const name of list) {
    if (!PAGE_BROWSERS.includes(name)) throw new Error(`--browsers: unknown browser ${name} (known: ${PAGE_BROWSERS.join(', ')})`);
  }
  return argv.includes('--no-chromium') ? list.filter((name) => name !== 'chromium') : list;
}

async function main() {
  const argv = process.argv.slice(2);
  if (argv.includes('--render')) {
    // Only render the last run's raw results again.
    const run = JSON.parse(fs.readFileSync(path.join(BUILD_DIR, 'results.json'), 'utf8'));
    process.stdout.write(renderReport({ ...run, engines: ENGINES }));
    return;
  }
  const ids = argv.filter((a) => !a.startsWith('--'));
  // A decoding row brings its variants (D2: D2h and D2b, its float16 and bfloat16 caches).
  const variants = (id) => config.decode.filter((w) => w.model === id).map((w) => w.id);
  const workloads = ids.length
    ? [...new Set(ids.flatMap((id) => [id, ...variants(id)]))].map(findWorkload)
    : [...config.workloads, ...config.decode, ...config.models];
  const forwards = workloads.some((w) => !isDecode(w) && !isModelRow(w));
  const started = performance.now();
  const loadBefore = os.loadavg()[0];
  const priority = raisePriority();
  // --pages-only: the page rows alone (no Node, native or PyTorch rows, no searches or probes).
  const pagesOnly = argv.includes('--pages-only');
  const browsers = pageBrowsers(argv);
  ensureModels(workloads);
  if (!pagesOnly) buildNative();
  const results = {};
  measureWorkloads(workloads, results, ENGINES.filter((e) => (e.browser ? browsers.includes(e.family) : !pagesOnly)));
  const longest = pagesOnly || argv.includes('--no-longest') || !forwards ? null : longestSequence();
  const peaks = !forwards ? null : pagesOnly ? { wasm: {}, native: {} } : limits(results);
  const bandwidths = workloads.some((w) => isDecode(w) && !isModelRow(w)) && !pagesOnly ? bandwidth() : null;
  const run = {
    machine: { ...machine(), priority }, workloads, results, longest, peaks, bandwidths, pagesOnly,
    load: [loadBefore, os.loadavg()[0]], minutes: (performance.now() - started) / 60000,
  };
  // The raw numbers, to re-render or compare runs.
  fs.writeFileSync(path.join(BUILD_DIR, 'results.json'), JSON.stringify(run, null, 1));
  process.stdout.write(renderReport({ ...run, engines: ENGINES }));
}

await main();

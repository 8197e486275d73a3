// The timing rule every runner follows (bench/native and torch_bench.py too):
// warm up with up to warmupReps runs while they take under warmupMs in all
// (at least one: onnxruntime-web needs about five to settle), then repeat for
// about budgetMs within [minReps, maxReps]; report the median. `before`, when
// given, runs (and is awaited) ahead of every run outside the timed span (a
// decoding step's cache rollback). No Node code: the browser page
// (bench/browser) imports it too; `timing` is workloads.json's "timing" or
// "decodeTiming".

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function timeOnce(run, before) {
  await before?.();
  const start = performance.now();
  await run();
  return performance.now() - start;
}

export async function measure(run, timing, before = undefined) {
  let warmup = await timeOnce(run, before);
  let last = warmup;
  for (let i = 1; i < timing.warmupReps && warmup + last < timing.warmupMs; i++) {
    last = await timeOnce(run, before);
    warmup += last;
  }
  const reps = Math.min(timing.maxReps, Math.max(timing.minReps, Math.ceil(timing.budgetMs / last)));
  const times = [];
  for (let i = 0; i < reps; i++) times.push(await timeOnce(run, before));
  return { medianMs: median(times), reps };
}

// Runs timed in rotation, one of each per round: each round shares whatever
// else the machine did meanwhile, so ratios within rounds hold where medians
// taken one after the other would carry the machine's changes. runs: [{ run,
// before? }] (`before` as in measure: outside the timed span, e.g. a decoding
// step's cache rollback). At least five rounds, each run warmed up by the rule
// above. Returns { reps: rounds, runs: [{ medianMs, ratio: the median of its
// ratios to runs[0] within a round }] }.
export async function measureRounds(runs, timing) {
  let roundMs = 0;
  for (const { run, before } of runs) roundMs += (await measure(run, { ...timing, maxReps: 1 }, before)).medianMs;
  const rounds = Math.min(timing.maxReps, Math.max(5, timing.minReps, Math.ceil(timing.budgetMs / roundMs)));
  const times = runs.map(() => []);
  for (let i = 0; i < rounds; i++) {
    for (const [j, { run, before }] of runs.entries()) times[j].push(await timeOnce(run, before));
  }
  return {
    reps: rounds,
    runs: times.map((t) => ({ medianMs: median(t), ratio: median(t.map((ms, i) => ms / times[0][i])) })),
  };
}

// Two runs in rotation (issue 22's option rows: `b` a forward with the option,
// `a` the same without it; issue 24's precisions: `a` the float32 step):
// { medianMs, baseMedianMs, pairRatio: the median of the pairs' ratios b / a, reps }.
export async function measurePair(a, b, timing, before = {}) {
  const { reps, runs: [base, one] } = await measureRounds([{ run: a, before: before.a }, { run: b, before: before.b }],
    timing);
  return { medianMs: one.medianMs, reps, baseMedianMs: base.medianMs, pairRatio: one.ratio };
}

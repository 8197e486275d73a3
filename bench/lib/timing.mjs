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

// Two runs timed in alternation (issue 22's option rows: `b` a forward with
// the option, `a` the same without it): each pair shares whatever else the
// machine did meanwhile, so the median of the pairs' ratios b / a holds
// where two medians taken in turn would carry the machine's changes. At
// least five pairs, each warmed up by the rule above. `before.a` and
// `before.b`, when given, run ahead of their run outside the timed span (a
// decoding step's cache rollback: issue 24's precisions against float32).
export async function measurePair(a, b, timing, before = {}) {
  const base = await measure(a, { ...timing, maxReps: 1 }, before.a);
  const one = await measure(b, { ...timing, maxReps: 1 }, before.b);
  const pairs = Math.min(timing.maxReps, Math.max(5, timing.minReps,
    Math.ceil(timing.budgetMs / (base.medianMs + one.medianMs))));
  const times = { a: [], b: [], ratios: [] };
  for (let i = 0; i < pairs; i++) {
    times.a.push(await timeOnce(a, before.a));
    times.b.push(await timeOnce(b, before.b));
    times.ratios.push(times.b.at(-1) / times.a.at(-1));
  }
  return { medianMs: median(times.b), reps: pairs, baseMedianMs: median(times.a), pairRatio: median(times.ratios) };
}

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

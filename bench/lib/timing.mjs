// The timing rule every runner follows (bench/native and torch_bench.py too):
// warm up, then repeat for about budgetMs within [minReps, maxReps]; report the median.
import { config } from './workloads.mjs';

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

async function timeOnce(run) {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

export async function measure(run, timing = config.timing) {
  const first = await timeOnce(run);
  // Short runs get two more warm-ups (JIT tiers, first-touch pages).
  if (first < 100) for (let i = 0; i < 2; i++) await timeOnce(run);
  const reps = Math.min(timing.maxReps, Math.max(timing.minReps, Math.ceil(timing.budgetMs / first)));
  const times = [];
  for (let i = 0; i < reps; i++) times.push(await timeOnce(run));
  return { medianMs: median(times), reps };
}

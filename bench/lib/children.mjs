// What the benchmark runners share: children with a time cap, the
// priority, PyTorch's environment, and the exported models the peers load.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { BENCH_DIR, ROOT_DIR, config, modelPath } from './workloads.mjs';
import { isDecode } from './decode.mjs';

export const PYTHON = '/usr/bin/python3';
const BENCH_NICE = -19;
export const HAS_AVX512 = fs.readFileSync('/proc/cpuinfo', 'utf8').includes('avx512f');
// Debian's OpenBLAS built for OpenMP (bench/setup.sh): it shares PyTorch's threads.
const OPENBLAS_OPENMP = '/usr/lib/x86_64-linux-gnu/openblas-openmp';

export function log(message) {
  process.stderr.write(`[bench] ${message}\n`);
}

// Runs one child; its last stdout line that is JSON is the result.
export function runChild(command, args, { env = {}, timeoutSeconds = config.timing.childTimeoutSeconds } = {}) {
  const child = spawnSync(command, args, {
    cwd: ROOT_DIR,
    env: { ...process.env, ...env },
    timeout: timeoutSeconds * 1000,
    killSignal: 'SIGKILL',
    maxBuffer: 64 << 20,
    encoding: 'utf8',
  });
  const json = (child.stdout ?? '').trim().split('\n').reverse().find((line) => line.startsWith('{'));
  if (json) return JSON.parse(json);
  if (child.error?.code === 'ETIMEDOUT') return { error: `timed out after ${timeoutSeconds} s` };
  const stderr = (child.stderr ?? '').trim().split('\n').filter(Boolean);
  const reason = stderr.reverse().find((line) => /error|abort|memory|killed/i.test(line)) ?? stderr[0];
  return { error: reason ?? `exited with ${child.status ?? child.signal}` };
}

export function torchEnv(threads) {
  return {
    // Debian's OpenBLAS picks SSE3 kernels on AVX-512 CPUs it does not know.
    ...(HAS_AVX512 ? { OPENBLAS_CORETYPE: 'SkylakeX' } : {}),
    ...(fs.existsSync(OPENBLAS_OPENMP) ? { LD_LIBRARY_PATH: OPENBLAS_OPENMP } : {}),
    OMP_NUM_THREADS: String(threads),
  };
}

// Ahead of builds that may share the machine; needs root. The kernel shares
// the CPU between sessions (autogroups) before it looks at nice values, so
// the session's autogroup is raised too. Children inherit both.
export function raisePriority() {
  try {
    os.setPriority(BENCH_NICE);
    fs.writeFileSync('/proc/self/autogroup', String(BENCH_NICE));
    return `nice ${BENCH_NICE}`;
  } catch (error) {
    log(`could not raise the priority to nice ${BENCH_NICE} (${error.code}): ` +
        'timings share the CPU with everything else running');
    return 'default priority';
  }
}

export function ensureModels(workloads) {
  const ids = [...config.workloads, config.gemm].map((w) => w.id);
  const missing = ids.filter((id) => !fs.existsSync(modelPath({ id }, 'onnx'))
    || !fs.existsSync(modelPath({ id }, 'safetensors')));
  const exportWith = (script, list) => {
    log(`exporting ${list.join(' ')} (bench/${script})`);
    const result = spawnSync(PYTHON, [path.join(BENCH_DIR, script), ...list], {
      stdio: ['ignore', 'inherit', 'inherit'], env: { ...process.env, ...torchEnv(os.availableParallelism()) },
    });
    if (result.status !== 0) throw new Error(`bench/${script} failed`);
  };
  if (missing.length) exportWith('export_onnx.py', missing);
  // Decoding rows: models, inputs and references together, every run.
  const decode = workloads.filter(isDecode).map((w) => w.id);
  if (decode.length) exportWith('export_decode.py', decode);
}


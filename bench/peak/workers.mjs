// Runs one WebAssembly module on several worker threads at once, in lock
// step: each worker instantiates it and prepares (setup), then every call of
// round() starts them together and resolves with the seconds until the last
// one finished. Used by simd_peak.mjs and read_bandwidth.mjs.
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';

const message = (worker) => new Promise((resolve, reject) => {
  worker.once('message', resolve);
  worker.once('error', reject);
});

// `script`: the URL of a module whose workers call serveRounds().
export async function startWorkers(script, threads, data) {
  const workers = Array.from({ length: threads }, () => new Worker(script, { workerData: data }));
  await Promise.all(workers.map(message));
  return {
    async round() {
      const start = performance.now();
      const done = Promise.all(workers.map(message));
      workers.forEach((w) => w.postMessage('go'));
      await done;
      return (performance.now() - start) / 1000;
    },
    stop: () => Promise.all(workers.map((w) => w.terminate())),
  };
}

// emcc's standalone modules that grow their memory import this notification.
const IMPORTS = { env: { emscripten_notify_memory_growth() {} } };

// In a worker: instantiates workerData.bytes (a reactor: _initialize first),
// calls setup(exports) once and work(exports) on every round.
export async function serveRounds(setup, work) {
  if (isMainThread) throw new Error('serveRounds runs in a worker');
  const { instance } = await WebAssembly.instantiate(workerData.bytes, IMPORTS);
  instance.exports._initialize?.();
  setup(instance.exports, workerData);
  parentPort.postMessage('ready');
  parentPort.on('message', () => {
    work(instance.exports, workerData);
    parentPort.postMessage('done');
  });
}

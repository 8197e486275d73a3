// The proxy's worker (web/src/proxy_worker.js, serveEngine) in a Node worker thread with Node's
// engine (env_node.js), for proxy.test.js. The page's load message names the browser files; here
// the engine's own stand in for them. With a `delaySeed` (workerData), the thread sleeps 0-2 ms at
// random before it takes each message.
import { parentPort, workerData } from 'node:worker_threads';
import * as env from '../../../web/src/env_node.js';
import { serveEngine } from '../../../web/src/proxy_worker.js';
import { lcg } from './random.js';

const sleeper = new Int32Array(new SharedArrayBuffer(4));
const random = workerData?.delaySeed ? lcg(workerData.delaySeed) : null;
const pause = () => random && Atomics.wait(sleeper, 0, 0, 2 * random());

serveEngine({
  postMessage: (message, transfer) => parentPort.postMessage(message, transfer),
  set onmessage(listener) {
    parentPort.on('message', (data) => {
      pause();
      listener({ data: data.op === 'load' ? { ...data, files: env.fileUrls() } : data });
    });
  },
}, env);

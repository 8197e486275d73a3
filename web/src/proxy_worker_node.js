// The proxy's worker in Node (loadMHA({ proxy: true })): proxy_worker.js's loop in a worker_threads
// thread, with Node's engine, which reads its own files (the client names only this script).
import { parentPort } from 'node:worker_threads';
import * as env from './env_node.js';
import { serveEngine } from './proxy_worker.js';

serveEngine({
  postMessage: (message, transfer) => parentPort.postMessage(message, transfer),
  set onmessage(listener) {
    parentPort.on('message', (data) => listener({ data }));
  },
  set onmessageerror(listener) {
    parentPort.on('messageerror', listener);
  },
}, env, env.fileUrls());

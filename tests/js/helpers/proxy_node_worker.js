// The proxy's worker (web/src/proxy_worker.js, serveEngine) in a Node worker thread with Node's
// engine (env_node.js), for proxy.test.js. The page's load message names the browser files; here
// the engine's own stand in for them.
import { parentPort } from 'node:worker_threads';
import * as env from '../../../web/src/env_node.js';
import { serveEngine } from '../../../web/src/proxy_worker.js';

serveEngine({
  postMessage: (message, transfer) => parentPort.postMessage(message, transfer),
  set onmessage(listener) {
    parentPort.on('message', (data) => listener({ data: data.op === 'load' ? { ...data, files: env.fileUrls() } : data }));
  },
}, env);

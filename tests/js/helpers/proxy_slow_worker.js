// The proxy's worker for Node (web/src/proxy_worker_node.js), slowed for proxy.test.js's race
// tests: the thread sleeps 0-2 ms at random before it takes each message.
import { parentPort } from 'node:worker_threads';
import { lcg } from './random.js';

const random = lcg(7);
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const on = parentPort.on.bind(parentPort);
parentPort.on = (event, listener) => on(event, event !== 'message' ? listener : (data) => {
  Atomics.wait(sleeper, 0, 0, 2 * random());
  listener(data);
});
await import('../../../web/src/proxy_worker_node.js');

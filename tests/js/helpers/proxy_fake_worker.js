// The proxy's worker loop (proxy_channel.js serveWorker, the code the package's worker runs) in a
// Node worker thread, with a fake engine in place of the WASM one, for proxy_channel.test.js.
// Calls: echo(token, array, replyLength, work) -> { token, got: [length, first, last], data } with
// `data` a Float32Array of `replyLength` copies of `token`; `work` > 0 awaits that many ms first.
// exit() ends the thread mid-call; crash() throws outside the loop's answers (a failure of its own).
// schedule() sets a timer; fired() says whether it has run since (the event loop ran between calls).
import { parentPort, workerData } from 'node:worker_threads';
import { placeArrays, receivedArrays } from '../../../web/src/proxy_arrays.js';
import { serveWorker } from '../../../web/src/proxy_channel.js';
import { loseWakeUps, pauses } from './proxy_pauses.js';

const port = {
  postMessage: (message, transfer) => parentPort.postMessage(message, transfer),
  set onmessage(listener) {
    parentPort.on('message', (data) => listener({ data }));
  },
};

async function echo(token, array, replyLength, work) {
  if (work > 0) await new Promise((resolve) => setTimeout(resolve, work));
  const got = [array.length, array[0] ?? null, array[array.length - 1] ?? null];
  return { token, got, data: new Float32Array(replyLength).fill(token) };
}

let fired = null;
const calls = {
  echo,
  exit: () => process.exit(3),
  crash: () => { throw new Error('the fake engine crashed'); },
  schedule: () => {
    fired = false;
    setTimeout(() => { fired = true; });
    return null;
  },
  fired: () => fired,
};

async function answer(message) {
  if (message.op === 'release') return { op: 'reply', id: message.id, states: {} };
  const args = placeArrays(message.args, receivedArrays(message));
  return { op: 'reply', id: message.id, value: await calls[message.method](...args), states: {} };
}

if (workerData.loseRate) loseWakeUps(workerData.seed, workerData.loseRate);

serveWorker(port, {
  load: async () => ({ op: 'loaded', info: { fake: true } }),
  answer,
  transfer: (reply) => (reply.value?.data ? [reply.value.data.buffer] : []),
}, pauses(workerData.seed, workerData.pauseRate));

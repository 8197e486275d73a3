// The proxy's shared-memory channel (web/src/proxy_channel.js) with the page's real Connection
// (proxy_client.js) and the worker's real loop, in a Node worker thread with a fake engine
// (helpers/proxy_fake_worker.js): thousands of calls in random order and sizes, under and over
// the channel's capacity (so some go by postMessage), many queued, with delays at every point
// where the other side can run (the channel's `pause` hook: between a store and its notify,
// after a postMessage and before its marker, before each wait), on both sides. No call may hang
// (each is given BOUND_MS) or receive another call's reply; the worker's event loop runs between
// calls; a wake-up that never comes delays a call, never hangs it; a worker that dies mid-call
// rejects the call in the channel and those queued.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Worker as NodeWorker } from 'node:worker_threads';
import { MHAError } from '../../web/src/errors.js';
import { ClientChannel } from '../../web/src/proxy_channel.js';
import { Connection } from '../../web/src/proxy_client.js';
import { lcg, loseWakeUps, pauses } from './helpers/proxy_pauses.js';

const CALLS = 4000;
const BOUND_MS = 10_000;
const CAPACITY_FLOATS = (1 << 16) / 4;
const FAKE_WORKER = new URL('./helpers/proxy_fake_worker.js', import.meta.url);
const LIBRARY = { handle: 0 };

// As on a cross-origin isolated page: queued calls stage their arrays in shared memory.
globalThis.crossOriginIsolated = true;

// The Web Worker API over a Node worker thread running the fake engine. A page learns that its
// worker ended from a lock (proxy_client.js); here the thread's exit stands in for it.
let workerData;
globalThis.Worker = class {
  constructor() {
    this.thread = new NodeWorker(FAKE_WORKER, { workerData });
    this.thread.on('message', (data) => this.onmessage({ data }));
    this.thread.on('error', ({ message }) => this.onerror({ message, preventDefault() {} }));
    this.thread.on('exit', (code) => this.onerror({ message: `exit code ${code}`, preventDefault() {} }));
  }

  postMessage(message, transfer) {
    this.thread.postMessage(message, transfer);
  }

  terminate() {
    this.thread.terminate();
  }
};

async function connect(seed, pauseRate, loseRate = 0) {
  workerData = { seed: seed + 1, pauseRate, loseRate };
  const connection = new Connection({}, {}, { url: FAKE_WORKER.href },
    new ClientChannel(pauses(seed, pauseRate)));
  await bounded(connection.loaded, 'the load');
  return connection;
}

// `promise`, or a failure once it has been pending for BOUND_MS.
function bounded(promise, what) {
  let timer;
  const hung = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} hung: unsettled after ${BOUND_MS} ms`)), BOUND_MS);
  });
  return Promise.race([promise, hung]).finally(() => clearTimeout(timer));
}

// Float counts: mostly small, many around the channel's capacity, some well over it.
function length(random) {
  const r = random();
  if (r < 0.5) return Math.floor(random() * 64);
  if (r < 0.8) return CAPACITY_FLOATS - 200 + Math.floor(random() * 400);
  return Math.floor(random() * 3 * CAPACITY_FLOATS);
}

// echo(token, ...) through `connection`, checked to be this call's reply.
function echo(connection, random, token) {
  const sent = Float32Array.from({ length: length(random) }, (_, i) => token + i);
  const replyLength = length(random);
  const work = random() < 0.1 ? Math.floor(random() * 3) : 0;
  const reply = connection.send(LIBRARY, 'echo', [token, sent, replyLength, work]);
  sent.fill(-1);   // the caller may change its arrays at once: they were copied
  return bounded(reply, `call ${token}`).then((value) => {
    assert.equal(value.token, token, `call ${token} received the reply to call ${value.token}`);
    assert.deepEqual(value.got, sent.length ? [sent.length, token, token + sent.length - 1] : [0, null, null]);
    assert.equal(value.data.length, replyLength);
    assert.ok(value.data.every((x) => x === token));
  });
}

describe('the proxy channel', () => {
  for (const pauseRate of [0, 0.25]) {
    test(`${CALLS} calls in random order and sizes, delays at ${pauseRate} of the points`, async () => {
      const random = lcg(11);
      const connection = await connect(7, pauseRate);
      try {
        let outstanding = [];
        for (let token = 1; token <= CALLS;) {
          // 1-6 calls sent at once: all but the first wait in the client's queue.
          for (let n = 1 + Math.floor(random() * 6); n > 0; n--, token++) {
            if (random() < 0.1) connection.release(token);
            else outstanding.push(echo(connection, random, token));
          }
          if (random() < 0.5) {
            await Promise.all(outstanding);
            outstanding = [];
          }
        }
        await Promise.all(outstanding);
      } finally {
        connection.die('the test is over');
      }
    });
  }

  test('lost wake-ups on both sides (notifies that wake no one, waits that never end) delay calls, never hang them', async () => {
    const { notify, waitAsync } = Atomics;
    const random = lcg(13);
    const connection = await connect(15, 0, 0.05);
    loseWakeUps(17, 0.05);
    try {
      for (let token = 1; token <= 200; token++) await echo(connection, random, token);
    } finally {
      Object.assign(Atomics, { notify, waitAsync });
      connection.die('the test is over');
    }
  });

  test("the worker's event loop runs between calls (its timers, finalizers, Emscripten's messages)", async () => {
    const connection = await connect(9, 0);
    try {
      await bounded(connection.send(LIBRARY, 'schedule', []), 'schedule');
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(await bounded(connection.send(LIBRARY, 'fired', []), 'fired'), true);
    } finally {
      connection.die('the test is over');
    }
  });

  for (const channel of [true, false]) {
    test(`a call that cannot be sent rejects and leaves nothing pending (${channel ? 'with' : 'without'} a channel)`, async () => {
      workerData = { seed: 2, pauseRate: 0 };
      const connection = new Connection({}, {}, { url: FAKE_WORKER.href },
        channel ? new ClientChannel() : null);
      try {
        await bounded(connection.loaded, 'the load');
        await assert.rejects(bounded(connection.send(LIBRARY, 'echo', [() => 1]), 'the uncloneable call'),
          (error) => error.name === 'DataCloneError');
        assert.equal(connection.pending.size, 0);
        await echo(connection, lcg(4), 2);
      } finally {
        connection.die('the test is over');
      }
    });
  }

  for (const method of ['exit', 'crash']) {
    test(`a worker that dies mid-call (${method}) rejects the call in the channel and those queued`, async () => {
      const random = lcg(3);
      const connection = await connect(5, 0.25);
      await echo(connection, random, 1);
      const dying = connection.send(LIBRARY, method, []);
      assert.equal(connection.inFlight.message.method, method);
      const queued = [2, 3, 4].map((token) => echo(connection, random, token));
      for (const call of [dying, ...queued]) {
        await assert.rejects(bounded(call, 'a call to the dead worker'),
          (error) => error instanceof MHAError && /worker stopped/.test(error.message));
      }
      await assert.rejects(connection.send(LIBRARY, 'echo', [5, new Float32Array(1), 1, 0]), MHAError);
    });
  }
});

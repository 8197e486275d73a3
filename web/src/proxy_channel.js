// A faster way to and from the proxy's worker for small calls, where the page can share memory
// (cross-origin isolated): two mailboxes in one SharedArrayBuffer, requests (page -> worker) and
// replies (worker -> page). A postMessage costs its sender and wakes a sleeping worker late; a
// mailbox costs a copy and an Atomics.notify.
// Protocol. The client sends one call at a time (the next once the last is answered); each call
// has an id, larger than any before. A mailbox's first word is the id of the message it holds or
// answers, stored after everything else in it, then notified. A request goes in the request
// mailbox (its message as JSON, then its typed arrays), or, when JSON would not carry it exactly
// (undefined, NaN, -0, ArrayBuffer, BigInt, ...) or its arrays do not fit, by postMessage
// followed by a marker with its id (KIND.posted) in the mailbox. The worker answers a mailbox
// request in the reply mailbox, or by postMessage followed by a marker with the id it answers;
// a request that came by postMessage is answered by postMessage. Both sides wait with
// Atomics.waitAsync (the worker's event loop stays free between calls: finalizers, Emscripten's
// thread messages) and never trust a wake-up: a reader loops until the first word holds the id
// it awaits (the client: its call's; the worker: any id but the last it took), so a late notify
// of an earlier message, or a marker of an earlier call, cannot be taken for the one awaited.
// Nor do they count on one: a reader also looks again every RECHECK_MS, by a timer of ours.
// WebKit (with SharedArrayBuffer) sometimes never settles a waitAsync promise: a call stayed
// unanswered about once in 300,000, its request stored and notified; with a timeout given to
// waitAsync, within 4,000 calls, the timeout not settling it either. So waits have no timeout,
// and a reader that looks again keeps the wait it has while the word is unchanged (a new one
// each time would pile up waiters while idle).
// Neither side writes a mailbox again before the other has answered what it holds, so a reader
// reads it in the turn that finds the id it awaits (the client only while that call is in flight).
import { alignUp } from './heap.js';
import { ARRAY, builtinType, placeArrays, receivedArrays } from './proxy_arrays.js';

const CAPACITY = 1 << 16;    // payload bytes per mailbox: a decoding step of E = 4096 fits
const WORDS = 4;             // [id, kind, JSON code units, arrays bytes]
const REQUEST = 0;
const REPLY = WORDS * 4 + CAPACITY;

const KIND = { message: 1, posted: 2 };
const RECHECK_MS = 250;      // how long a reader waits before it looks again without a wake-up

// Whether JSON.parse(JSON.stringify(value)) equals value (plain data only).
function jsonExact(value) {
  switch (typeof value) {
    case 'string': case 'boolean': return true;
    case 'number': return Number.isFinite(value) && !Object.is(value, -0);
    case 'object':
      if (value === null) return true;
      if (Array.isArray(value)) return value.every(jsonExact);
      if (Object.getPrototypeOf(value) !== Object.prototype) return false;
      for (const key in value) if (!jsonExact(value[key])) return false;
      return true;
    default: return false;
  }
}

// Resolves once `promise` settles or `ms` have passed, whichever is first.
function settledOrLater(promise, ms) {
  let timer;
  const later = new Promise((resolve) => { timer = setTimeout(resolve, ms); });
  return Promise.race([promise, later]).finally(() => clearTimeout(timer));
}

// One direction: a header of Int32 words and a payload [arrays, 16-byte aligned | JSON]. The JSON
// is kept as UTF-16 code units: TextEncoder and TextDecoder refuse shared memory in Chromium, and
// with a copy they are slower than this loop. The message read carries
// `staged: { buffer, views }` for its arrays, as proxy_arrays.js reads them. `pause()` runs where
// the other side may run meanwhile (a test delays there).
class Mailbox {
  constructor(buffer, at, pause) {
    this.buffer = buffer;
    this.pause = pause;
    this.words = new Int32Array(buffer, at, WORDS);
    this.payloadAt = at + WORDS * 4;
    this.payload = new Uint8Array(buffer, this.payloadAt, CAPACITY);
  }

  // Writes `message` and the arrays its { [ARRAY]: i } stand for as message `id`, then wakes the
  // reader; false, writing nothing, when JSON would not carry it exactly, an array is not of a
  // builtin type or it does not fit.
  write(id, message, arrays) {
    const types = arrays.map(builtinType);
    if (types.includes(null) || !jsonExact(message)) return false;
    const views = [];
    let bytes = 0;
    for (const [i, array] of arrays.entries()) {
      views.push([types[i], this.payloadAt + bytes, array.length]);
      bytes += alignUp(array.byteLength);
    }
    if (bytes >= CAPACITY) return false;
    const json = JSON.stringify({ ...message, views });
    if (bytes + 2 * json.length > CAPACITY) return false;
    const units = new Uint16Array(this.buffer, this.payloadAt + bytes, json.length);
    for (let i = 0; i < json.length; i++) units[i] = json.charCodeAt(i);
    arrays.forEach((array, i) => {
      this.payload.set(new Uint8Array(array.buffer, array.byteOffset, array.byteLength),
        views[i][1] - this.payloadAt);
    });
    this.words[2] = json.length;
    this.words[3] = bytes;
    this.publish(id, KIND.message);
    return true;
  }

  // Says that message `id` is in the mailbox, or (KIND.posted) went by postMessage, and wakes
  // the reader. The id goes last: a reader that sees it sees the rest.
  publish(id, kind) {
    Atomics.store(this.words, 1, kind);
    Atomics.store(this.words, 0, id);
    this.pause();
    Atomics.notify(this.words, 0);
  }

  // Resolves to the id in the mailbox once `wanted(id)` holds, or to null once `live()` no
  // longer does. waitAsync on the id last seen returns at once if another is there already;
  // any wake-up, or RECHECK_MS without one, only makes it look again.
  async until(wanted, live = () => true) {
    let wait = null;   // { id, settled, done }: the last wait, on `id`
    for (;;) {
      const id = Atomics.load(this.words, 0);
      if (wanted(id)) return id;
      if (!live()) return null;
      this.pause();
      if (wait?.id !== id || wait.done) {
        const { async, value } = Atomics.waitAsync(this.words, 0, id);
        if (!async) continue;
        const pending = { id, done: false };
        pending.settled = value.then(() => { pending.done = true; });
        wait = pending;
      }
      await settledOrLater(wait.settled, RECHECK_MS);
    }
  }

  // { kind, message? }: what the mailbox holds, its arrays in place.
  read() {
    const kind = this.words[1];
    if (kind !== KIND.message) return { kind };
    const units = new Uint16Array(this.buffer, this.payloadAt + this.words[3], this.words[2]);
    const { views, ...message } = JSON.parse(String.fromCharCode.apply(null, units));
    message.staged = { buffer: this.buffer, views };
    return { kind, message };
  }
}

// The client's mailboxes: requests out, replies in.
export class ClientChannel {
  constructor(pause = () => {}) {
    this.buffer = new SharedArrayBuffer(2 * (WORDS * 4 + CAPACITY));
    this.pause = pause;
    this.requests = new Mailbox(this.buffer, REQUEST, pause);
    this.replies = new Mailbox(this.buffer, REPLY, pause);
  }

  // Sends the request `message` (named by its id): in the mailbox when `arrays` (its typed
  // arrays, see Mailbox.write) is not null and it fits, else by `post()` and a marker. Resolves
  // to the reply, its arrays copied out of shared memory, when it comes in the mailbox; to null
  // when it comes by postMessage, or when `live()` turns false first (the worker died).
  async call(message, arrays, post, live) {
    const { id } = message;
    if (arrays === null || !this.requests.write(id, message, arrays)) {
      post();
      this.pause();
      this.requests.publish(id, KIND.posted);
      return null;
    }
    const answered = await this.replies.until((seen) => seen === id, live);
    // Read in the turn that finds the call live: until the client sends the next request, the
    // worker writes nothing more in the reply mailbox (a call that is no longer live might read
    // the next reply as it is being written).
    if (answered === null || !live()) return null;
    const { message: reply } = this.replies.read();
    if (reply === undefined) return null;
    const copies = receivedArrays(reply).map((array) => array.slice());
    delete reply.staged;
    if ('value' in reply) reply.value = placeArrays(reply.value, copies);
    return reply;
  }

  // Wakes a call waiting for its reply, so that it finds itself no longer live.
  interrupt() {
    Atomics.notify(this.replies.words, 0);
  }
}

// The worker's side of the same buffer.
export class WorkerChannel {
  constructor(buffer, pause) {
    this.pause = pause;
    this.requests = new Mailbox(buffer, REQUEST, pause);
    this.replies = new Mailbox(buffer, REPLY, pause);
    this.last = 0;   // the id of the request last taken
  }

  // The next request: { kind, message? }, its arrays read in place.
  async nextRequest() {
    this.last = await this.requests.until((id) => id !== this.last);
    return this.requests.read();
  }

  // Answers with `reply` ({ id, value, ... }, the arrays in `value`): in the mailbox if it fits,
  // else by `post(reply)` and a marker with the id it answers.
  reply(reply, post) {
    const { value, ...message } = reply;
    const arrays = [];
    if (value !== undefined) message.value = liftArrays(value, arrays);
    if (this.replies.write(reply.id, message, arrays)) return;
    post(reply);
    this.pause();
    this.replies.publish(reply.id, KIND.posted);
  }
}

// Typed arrays in `value` as { [ARRAY]: i } (`arrays[i]`); placeArrays turns them back.
function liftArrays(value, arrays) {
  if (ArrayBuffer.isView(value)) return { [ARRAY]: arrays.push(value) - 1 };
  if (Array.isArray(value)) return value.map((v) => liftArrays(v, arrays));
  if (value === null || typeof value !== 'object' || Object.getPrototypeOf(value) !== Object.prototype) return value;
  return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, liftArrays(v, arrays)]));
}

// The worker's message loop: answers each message, one at a time in the order sent (a call waits
// for the load and for every call sent before it, as it would in the caller's thread).
// `load(message)` answers { op: 'load', channel? } and `answer(message)` the calls; `transfer(reply)`
// lists the buffers handed over with a reply by postMessage. With a channel, the loop takes
// requests from it between messages (see the protocol above) until a marker says that one came
// by postMessage: that one is answered next, then the loop goes back to the channel.
// A failure of the loop's own (a call's errors are replies) is thrown outside the chain: it
// reaches the page's onerror, which rejects the pending calls, where a rejected queue would leave
// them waiting.
export function serveWorker(port, { load, answer, transfer }, pause = () => {}) {
  let channel = null;
  const post = (reply) => port.postMessage(reply, transfer(reply));
  const handle = async (message) => {
    if (message.op === 'load') {
      if (message.channel) channel = new WorkerChannel(message.channel, pause);
      return port.postMessage(await load(message));
    }
    post(await answer(message));
  };
  const serve = async () => {
    for (;;) {
      const { kind, message } = await channel.nextRequest();
      if (kind === KIND.posted) return;
      channel.reply(await answer(message), post);
    }
  };
  let queue = Promise.resolve();
  port.onmessage = ({ data }) => {
    queue = queue.then(() => handle(data)).then(() => channel && serve())
      .catch((error) => setTimeout(() => { throw error; }));
  };
}

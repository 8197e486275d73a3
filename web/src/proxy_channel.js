// A faster way to and from the proxy's worker for small calls, where the page can share memory
// (cross-origin isolated): two mailboxes in one SharedArrayBuffer. The client writes a request
// (its message as JSON, then its typed arrays) and wakes the worker, which sleeps in Atomics.wait
// between calls (it does not spin); the worker writes the reply the same way and wakes the page,
// which waits with Atomics.waitAsync. Why: in Chromium 156 on a 2-core Zen 3 (load 1.7-2.8), a
// postMessage cost its sender 25-30 µs and reached a sleeping worker 40-65 µs later, and an
// empty round trip page -> worker -> page took 65-115 µs by postMessage both ways, 10-20 µs this
// way (medians of 500; when the other core is busy both grow to ~110-130 µs, as each wake-up
// waits for a core).
// A message that JSON would not carry exactly (undefined, NaN, -0, ArrayBuffer, BigInt, ...),
// or whose arrays do not fit, goes by postMessage as before, and the mailbox then only says so.
// One message is in flight at a time: the client writes the next once the last is answered.
import { ARRAY, builtinType, placeArrays, receivedArrays } from './proxy_arrays.js';

const CAPACITY = 1 << 16;    // payload bytes per mailbox: a decoding step of E = 4096 fits
const WORDS = 4;             // [sequence, kind, JSON code units, arrays bytes]
const ALIGN = 16;
const REQUEST = 0;
const REPLY = WORDS * 4 + CAPACITY;

export const KIND = { message: 1, posted: 2 };

const alignUp = (bytes) => Math.ceil(bytes / ALIGN) * ALIGN;

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

// One direction: a header of Int32 words and a payload [arrays, 16-byte aligned | JSON]. The JSON
// is kept as UTF-16 code units: TextEncoder and TextDecoder refuse shared memory in Chromium, and
// with a copy they took 4-6 µs more per message than this loop (a forward's 250 characters). The
// message read carries `staged: { buffer, views }` for its arrays, as proxy_arrays.js reads them.
class Mailbox {
  constructor(buffer, at, pause) {
    this.buffer = buffer;
    this.pause = pause;
    this.words = new Int32Array(buffer, at, WORDS);
    this.payloadAt = at + WORDS * 4;
    this.payload = new Uint8Array(buffer, this.payloadAt, CAPACITY);
  }

  // Writes `message` and the arrays its { [ARRAY]: i } stand for, then wakes the reader; false,
  // writing nothing, when JSON would not carry it exactly, an array is not of a builtin type or
  // it does not fit.
  write(message, arrays) {
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
    this.post(KIND.message);
    return true;
  }

  // Wakes the reader: the message is in the mailbox, or (KIND.posted) went by postMessage.
  post(kind) {
    Atomics.store(this.words, 1, kind);
    Atomics.add(this.words, 0, 1);
    this.pause('notify');
    Atomics.notify(this.words, 0);
  }

  // { kind, message? }: the message last posted, its arrays in place.
  read() {
    const kind = this.words[1];
    if (kind !== KIND.message) return { kind };
    const units = new Uint16Array(this.buffer, this.payloadAt + this.words[3], this.words[2]);
    const { views, ...message } = JSON.parse(String.fromCharCode.apply(null, units));
    message.staged = { buffer: this.buffer, views };
    return { kind, message };
  }
}

// The client's mailboxes: requests out, replies in. `pause(point)` runs where the worker may
// run meanwhile (a test delays there).
export class ClientChannel {
  constructor(pause = () => {}) {
    this.buffer = new SharedArrayBuffer(2 * (WORDS * 4 + CAPACITY));
    this.pause = pause;
    this.requests = new Mailbox(this.buffer, REQUEST, pause);
    this.replies = new Mailbox(this.buffer, REPLY, pause);
  }

  // Writes a request (see Mailbox.write), then calls `receive` with its reply, its arrays copied
  // out of shared memory, unless it came by postMessage or `current()` no longer holds when it
  // is read (the worker may then be writing the next). False when it cannot carry the request.
  call(message, arrays, current, receive) {
    // Before writing: the worker may answer before waitAsync below is called.
    const seen = Atomics.load(this.replies.words, 0);
    if (!this.requests.write(message, arrays)) return false;
    this.pause('wait');
    const wait = Atomics.waitAsync(this.replies.words, 0, seen);
    const read = () => {
      if (!current()) return;
      const { message } = this.replies.read();
      if (message === undefined) return;
      const arrays = receivedArrays(message).map((array) => array.slice());
      delete message.staged;
      if ('value' in message) message.value = placeArrays(message.value, arrays);
      receive(message);
    };
    if (wait.async) wait.value.then(read);
    else read();
    return true;
  }
}

// The worker's side of the same buffer.
export class WorkerChannel {
  constructor(buffer, pause) {
    this.pause = pause;
    this.requests = new Mailbox(buffer, REQUEST, pause);
    this.replies = new Mailbox(buffer, REPLY, pause);
    this.seen = 0;
  }

  // Sleeps until the client posts; { kind, message? }, its arrays read in place.
  nextRequest() {
    this.pause('wait');
    Atomics.wait(this.requests.words, 0, this.seen);
    this.seen = Atomics.load(this.requests.words, 0);
    return this.requests.read();
  }

  // Writes the reply { id, value, ... } with the arrays in `value`; false when it cannot.
  reply({ value, ...message }) {
    const arrays = [];
    if (value !== undefined) message.value = liftArrays(value, arrays);
    return this.replies.write(message, arrays);
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
// lists the buffers handed over with a reply by postMessage. With a channel the loop sleeps on it
// between messages: each comes in it, or by postMessage when it says so, and is answered the way
// it came (by postMessage when the reply does not fit). `pause` as for ClientChannel.
// A failure of the loop's own (a call's errors are replies) is thrown outside the chain: it
// reaches the page's onerror, which rejects the pending calls, where a rejected queue would leave
// them waiting.
export function serveWorker(port, { load, answer, transfer }, pause = () => {}) {
  let channel = null;
  const handle = async (message) => {
    if (message.op === 'load') {
      if (message.channel) channel = new WorkerChannel(message.channel, pause);
      return port.postMessage(await load(message));
    }
    const reply = await answer(message);
    port.postMessage(reply, transfer(reply));
  };
  // Answers the channel's messages until one comes by postMessage.
  const serve = async () => {
    for (;;) {
      const { kind, message } = channel.nextRequest();
      if (kind === KIND.posted) return;
      const reply = await answer(message);
      if (!channel.reply(reply)) {
        port.postMessage(reply, transfer(reply));
        pause('marker');
        channel.replies.post(KIND.posted);
      }
    }
  };
  let queue = Promise.resolve();
  port.onmessage = ({ data }) => {
    queue = queue.then(() => handle(data)).then(() => channel && serve())
      .catch((error) => setTimeout(() => { throw error; }));
  };
}

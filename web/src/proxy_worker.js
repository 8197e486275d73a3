// The proxy's worker (bundled into dist/mha-proxy-worker.mjs): loads the
// engine in this thread and runs the client's calls on the same objects the
// in-thread API uses, one at a time in the order sent. Protocol (the worker first says
// { op: 'started' }, so that the client tells a script that did not load from one that threw):
//   { op: 'load', options, files, lock }      -> { op: 'loaded', info } | { op: 'failed', error }
//   { op: 'call', id, target, method, args, create? }
//                                             -> { op: 'reply', id, value | error, states }
//   { op: 'release', id, target }             (dispose)  -> { op: 'reply', id, states }
// A call of method STEP runs a step of a load the client reads (STEPS below).
// A call's arrays come as `staged: { buffer, views: [[type, byteOffset, length], ...] }` (a buffer
// the client filled, read in place: shared, or handed over) or `arrays: [copies]` (proxy_client.js).
// Objects are addressed by handle (0 = the library); `create` is the handle
// the client chose for the object a `creates` method returns.
import * as browserEnv from './env_browser.js';
import { loadInThread } from './load.js';
import { ARRAY, HANDLE, PROXIED, STEP, errorFields } from './proxy_table.js';
import { MHAError } from './errors.js';
import { listHeadersOf } from './library.js';
import { coreLoadOf, shownLoad } from './multihead_attention.js';

// The arrays of a message, in index order.
function receivedArrays({ staged, arrays }) {
  if (staged === undefined) return arrays;
  return staged.views.map(([type, offset, length]) =>
    new globalThis[type](staged.buffer, offset, length));
}

const objects = new Map();   // handle -> { object, type }
const failed = new Map();    // handle -> the error that kept it from being made

function lookUp(handle) {
  const entry = objects.get(handle);
  if (entry !== undefined) return entry;
  throw failed.get(handle) ?? new MHAError('expected a live object, received one that was disposed');
}

// The arguments with each { [ARRAY]: i } as arrays[i] and each handle as the object it addresses.
function decode(value, arrays) {
  if (Array.isArray(value)) return value.map((v) => decode(v, arrays));
  if (value === null || typeof value !== 'object' || value instanceof ArrayBuffer) return value;
  if (ARRAY in value) return arrays[value[ARRAY]];
  if (HANDLE in value) return lookUp(value[HANDLE]).object;
  return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, decode(v, arrays)]));
}

// The worker's side of the calls whose checkpoint the client reads (proxy_client.js, READS), step
// by step on their target: listAttentionModules from the headers; a load's core (a CoreLoad,
// safetensors_load.js) started from them, kept under the handle the client chose until it
// releases it, fed each tensor's bytes (transferred) and finished.
const STEPS = {
  list: (lib, headers) => listHeadersOf(lib, headers),
  start: (mha, handle, headers, options) => {
    const core = coreLoadOf(mha, options);
    objects.set(handle, { object: core, type: null });
    return core.start(headers);
  },
  feed: (mha, handle, tensor, bytes, shard) => lookUp(handle).object.feed(tensor, bytes, shard),
  finish: (mha, handle) => {
    lookUp(handle).object.finish();
    return shownLoad(mha);
  },
};

function handlesIn(value, found = []) {
  if (value === null || typeof value !== 'object' || value instanceof ArrayBuffer) return found;
  if (HANDLE in value) found.push(value[HANDLE]);
  else for (const v of Object.values(value)) handlesIn(v, found);
  return found;
}

// The results' own buffers, handed over instead of copied.
function buffersIn(value, found = []) {
  if (ArrayBuffer.isView(value)) {
    if (value.buffer instanceof ArrayBuffer) found.push(value.buffer);
  } else if (value !== null && typeof value === 'object') {
    for (const v of Object.values(value)) buffersIn(v, found);
  }
  return found;
}

function stateOf({ object }, keys) {
  return Object.fromEntries(keys.map((key) => [key, object[key]]));
}

async function call({ id, target, method, args, create, staged, arrays }) {
  const entry = lookUp(target);
  const spec = PROXIED[entry.type];
  const loaded = spec.loads[method];
  const made = spec.creates[method] ?? loaded;
  if (!(method in spec.calls) && method !== STEP && made === undefined) {
    throw new MHAError(`${method}: not a method the proxy forwards`);
  }
  let value;
  try {
    const decoded = decode(args, receivedArrays({ staged, arrays }));
    value = await (method === STEP ? STEPS[decoded[0]](entry.object, ...decoded.slice(1)) :
      entry.object[method](...decoded));
  } catch (error) {
    if (made !== undefined) failed.set(create, error);
    throw error;
  }
  const states = {};
  for (const handle of [target, ...handlesIn(args)]) {
    const other = objects.get(handle);
    if (other && PROXIED[other.type].mirror.length) states[handle] = stateOf(other, PROXIED[other.type].mirror);
  }
  if (made === undefined) return { id, value, states };
  const created = { object: value, type: made.type };
  objects.set(create, created);
  states[create] = stateOf(created, PROXIED[made.type][loaded ? 'getters' : 'mirror']);
  return { id, value: null, states };
}

function release(handle) {
  const entry = objects.get(handle);
  objects.delete(handle);
  failed.delete(handle);
  entry?.object.dispose();
}

// Holds the client's lock for as long as this worker lives: the client learns
// that the worker is gone (terminated, crashed) when it gets the lock.
function holdLock(name) {
  if (!name || !globalThis.navigator?.locks) return Promise.resolve();
  return new Promise((held) => navigator.locks.request(name, () => {
    held();
    return new Promise(() => {});
  }));
}

async function load({ options, files, lock }, env) {
  await holdLock(lock);
  const lib = await loadInThread(options, env, files);
  objects.set(0, { object: lib, type: 'MHALibrary' });
  return { op: 'loaded', info: lib.info };
}

// The reply to a call or release.
async function answer(message) {
  if (message.op === 'release') {
    release(message.target);
    return { op: 'reply', id: message.id, states: {} };
  }
  try {
    return { op: 'reply', ...(await call(message)) };
  } catch (error) {
    return { op: 'reply', id: message.id, error: errorFields(error), states: {} };
  }
}

// Answers the client's messages on `port` with the engine loaded by `env` (env_browser.js in the
// package's worker, env_node.js in Node's: proxy_worker_node.js) from `files`, or where null, the
// load message's (a page's worker loads the files its page names): one at a time in the order
// sent (a call waits for the load and for every call sent before it, as it would in the caller's
// thread), a reply's own buffers handed over. A failure of the loop's own (a call's errors are
// replies) is thrown outside the chain: it reaches the page's onerror, which rejects the pending
// calls, where a rejected queue would leave them waiting.
export function serveEngine(port, env, files = null) {
  const handle = async (message) => {
    if (message.op === 'load') {
      return port.postMessage(await load({ ...message, files: files ?? message.files }, env)
        .catch((error) => ({ op: 'failed', error: errorFields(error) })));
    }
    const reply = await answer(message);
    port.postMessage(reply, buffersIn(reply.value));
  };
  let queue = Promise.resolve();
  const enqueue = (work) => {
    queue = queue.then(work).catch((error) => setTimeout(() => { throw error; }));
  };
  port.onmessage = ({ data }) => enqueue(() => handle(data));
  // A message this thread could not read (a browser may fail to deserialize one, out of memory)
  // would leave its call unanswered for good: it fails the loop instead, after the calls sent
  // before it, as the client's onmessageerror does for a reply.
  port.onmessageerror = () => enqueue(() => {
    throw new MHAError('the proxy worker received a message that could not be read');
  });
  port.postMessage({ op: 'started' });
}

// In the package's worker (its bundle, dist/mha-proxy-worker.mjs), at once.
if (typeof WorkerGlobalScope === 'function' && self instanceof WorkerGlobalScope) serveEngine(self, browserEnv);

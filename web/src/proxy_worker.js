// The proxy's worker (bundled into dist/mha-proxy-worker.mjs): loads the
// engine in this thread and runs the client's calls on the same objects the
// in-thread API uses, one at a time in the order sent. Protocol (the worker first says
// { op: 'started' }, so that the client tells a script that did not load from one that threw):
//   { op: 'load', options, files, lock }      -> { op: 'loaded', info } | { op: 'failed', error }
//   { op: 'call', id, target, method, args, create? }
//                                             -> { op: 'reply', id, value | error, states }
//   { op: 'release', id, target }             (dispose)  -> { op: 'reply', id, states }
// With a channel (proxy_channel.js; `channel` is its buffer in the load message) the calls come
// through it as well, or by postMessage when it says so; proxy_channel.js states that protocol
// and runs the loop (serveWorker).
// Objects are addressed by handle (0 = the library); `create` is the handle
// the client chose for the object a `creates` method returns.
import * as env from './env_browser.js';
import { loadInThread } from './load.js';
import { placeArrays, receivedArrays } from './proxy_arrays.js';
import { serveWorker } from './proxy_channel.js';
import { HANDLE, PROXIED } from './proxy_table.js';
import { MHAError } from './errors.js';

const objects = new Map();   // handle -> { object, type }
const failed = new Map();    // handle -> the error that kept it from being made

function lookUp(handle) {
  const entry = objects.get(handle);
  if (entry !== undefined) return entry;
  throw failed.get(handle) ?? new MHAError('expected a live object, received one that was disposed');
}

// Handles in the arguments become the objects they stand for, array indices
// the arrays (proxy_arrays.js).
function decode(value, arrays) {
  return placeArrays(value, arrays, (object) => (HANDLE in object ? lookUp(object[HANDLE]).object : undefined));
}

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

function encodeError(error) {
  return { name: error?.name ?? 'Error', message: error?.message ?? String(error) };
}

async function call({ id, target, method, args, create, staged, arrays }) {
  const entry = lookUp(target);
  const spec = PROXIED[entry.type];
  const loaded = spec.loads[method];
  const made = spec.creates[method] ?? loaded;
  if (!(method in spec.calls) && made === undefined) {
    throw new MHAError(`${method}: not a method the proxy forwards`);
  }
  let value;
  try {
    value = await entry.object[method](...decode(args, receivedArrays({ staged, arrays })));
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

async function load({ options, files, lock }) {
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
    return { op: 'reply', id: message.id, error: encodeError(error), states: {} };
  }
}

// The engine's answers to the client's messages (proxy_channel.js runs the loop).
serveWorker(self, {
  load: (message) => load(message).catch((error) => ({ op: 'failed', error: encodeError(error) })),
  answer,
  transfer: (reply) => buffersIn(reply.value),
});
self.postMessage({ op: 'started' });

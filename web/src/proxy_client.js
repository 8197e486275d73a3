// The page's side of the proxy: the same API as the in-thread library, run
// by the package's own Worker (proxy_worker.js) so that the page never
// blocks. Classes and methods come from proxy_table.js. Arguments are copied
// to the worker; results come back transferred, or (small ones, on a
// cross-origin isolated page) copied out of the shared channel (proxy_channel.js);
// either way the caller owns them. A worker that dies rejects
// every pending call with an MHAError; the library's next call starts a new
// one (objects made in the old one are lost).
import { MHAError } from './errors.js';
import { ARRAY, ArraySender, checkAttached } from './proxy_arrays.js';
import { ClientChannel } from './proxy_channel.js';
import { HANDLE, PROXIED } from './proxy_table.js';
import { Lifetime } from './lifetime.js';
import { forget } from './load_once.js';
import { returnPromises } from './promise_methods.js';
import { shapeKey } from './validate.js';
import { workerScript, workerStartFailure } from './env_browser.js';

function toError({ name, message }) {
  if (name === 'MHAError') return new MHAError(message);
  return Object.assign(new Error(message), { name });
}

// Arguments as a message: proxied objects become handles, typed arrays
// { [ARRAY]: index } into `arrays` (a Map of array -> index; self-attention
// passes one array as query, key and value, and it is sent once; see
// proxy_arrays.js), objects their properties (tensors' data and shape or dims
// also when they are getters of a class, as onnxruntime-web's Tensor's data).
function encode(value, objects, path, arrays) {
  if (ArrayBuffer.isView(value)) {
    if (!arrays.has(value)) {
      checkAttached(value, path);
      arrays.set(value, arrays.size);
    }
    return { [ARRAY]: arrays.get(value) };
  }
  if (Array.isArray(value)) return value.map((v, i) => encode(v, objects, `${path}[${i}]`, arrays));
  if (value === null || typeof value !== 'object' || value instanceof ArrayBuffer) return value;
  if (value instanceof ProxiedObject) {
    objects.push(value);
    return { [HANDLE]: value.handle };
  }
  const keys = new Set(Object.keys(value));
  const shape = shapeKey(value);
  if ('data' in value && shape !== undefined) keys.add('data').add(shape);
  return Object.fromEntries([...keys].map((key) =>
    [key, encode(value[key], objects, `${path}.${key}`, arrays)]));
}

const sharedMemory = () => globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function' &&
  typeof Atomics.waitAsync === 'function';

// One worker and the calls pending in it, each named by an id (increasing). With a channel
// (proxy_channel.js, whose comment states the protocol), one call is in the worker at a time:
// the others wait in `queue`, their arrays copied at call time, and go by postMessage. A reply
// settles its call by its id, whichever way it came. `script`: how the worker starts
// (env_browser.js's workerScript). (A test passes its own channel.)
export class Connection {
  constructor(options, files, script, channel = sharedMemory() ? new ClientChannel() : null) {
    this.pending = new Map();   // id -> { resolve, reject, objects, message, arrays, staging }
    this.arrays = new ArraySender();
    this.channel = channel;
    this.queue = [];
    this.inFlight = null;
    this.nextId = 1;
    this.nextHandle = 1;
    this.dead = null;           // the MHAError once the worker is gone
    this.started = false;       // whether the worker has said anything (so its script ran)
    this.loaded = new Promise((resolve, reject) => { this.settleLoad = { resolve, reject }; });
    const lock = globalThis.navigator?.locks ? `mha-wasm-proxy-${Math.random().toString(36).slice(2)}` : null;
    this.loaded.then(() => {
      if (lock && !this.dead) navigator.locks.request(lock, () => this.die('it was terminated'));
    }, () => {});
    this.worker = this.startWorker(script);
    this.worker?.postMessage({ op: 'load', options: { threads: options.threads, build: options.build }, files,
      lock, channel: this.channel?.buffer });
  }

  // The worker, started from `script`; null, and this connection dead, if it could not start.
  startWorker(script) {
    const notStarted = (detail) => this.die(new MHAError("mha-wasm: the engine's worker did not start: " +
                                                         `${workerStartFailure(script)} (${detail})`));
    let worker;
    try {
      worker = new Worker(script.url, { type: 'module' });
    } catch (error) {
      notStarted(error.message);
      return null;
    }
    worker.onmessage = ({ data }) => {
      this.started = true;
      this.receive(data);
    };
    worker.onerror = (event) => {
      event.preventDefault();
      if (this.started) this.die(event.message || 'it threw');
      else notStarted(event.message || 'its script did not load');
    };
    worker.onmessageerror = () => this.die('it sent a message that could not be read');
    return worker;
  }

  receive(message) {
    if (message.op === 'started') return;
    if (message.op === 'loaded') return this.settleLoad.resolve(message.info);
    if (message.op === 'failed') {
      this.settleLoad.reject(toError(message.error));
      return this.die('it could not load the engine');
    }
    const call = this.pending.get(message.id);
    if (call === undefined) return;   // sent before the worker was ended
    this.pending.delete(message.id);
    if (this.inFlight === call) {
      this.inFlight = null;
      this.dispatch();
    }
    if (call.staging) this.arrays.release(call.staging);
    for (const object of call.objects) {
      const state = message.states[object.handle];
      if (state) object.state = { ...object.state, ...state };
    }
    if (message.error) call.reject(toError(message.error));
    else call.resolve(message.value);
  }

  // reason: why the worker stopped, or the MHAError to fail with.
  die(reason) {
    if (this.dead) return;
    this.dead = reason instanceof MHAError ? reason : new MHAError(
      `mha-wasm: the engine's worker stopped (${reason}); the calls pending failed and the ` +
      "modules made there are gone; the library's next call starts a new worker");
    this.worker?.terminate();
    this.settleLoad.reject(this.dead);
    for (const { reject } of this.pending.values()) reject(this.dead);
    this.pending.clear();
    this.queue = [];
    this.inFlight = null;
    this.channel?.interrupt();
  }

  // Sends target.method(...args); `created` is the object a `creates` method returns.
  send(target, method, args, created) {
    if (this.dead) return Promise.reject(this.dead);
    const objects = [target];
    const arrays = new Map();
    const message = { op: 'call', id: this.nextId++, target: target.handle, method,
      args: args.map((arg, i) => encode(arg, objects, `${method}: argument ${i + 1}`, arrays)) };
    if (created) {
      message.create = created.handle;
      objects.push(created);
    }
    return new Promise((resolve, reject) => this.post({ resolve, reject, objects, message, arrays: [...arrays.keys()] }));
  }

  // Posts `call`, or queues it behind the one in flight with its arrays copied now.
  post(call) {
    this.pending.set(call.message.id, call);
    if (this.channel === null) {
      try {
        this.postMessage(call);
      } catch (error) {
        this.fail(call, error);
      }
      return;
    }
    if (this.inFlight !== null) this.pack(call);
    this.queue.push(call);
    this.dispatch();
  }

  // Answers `call`, which could not be sent (its message could not be cloned), with that error.
  fail(call, { name, message }) {
    this.receive({ id: call.message.id, error: { name, message }, states: {} });
  }

  pack(call) {
    Object.assign(call.message, this.arrays.pack(call.arrays));
    call.staging = call.message.staged?.buffer;
    call.arrays = null;
  }

  // Sends `call` by postMessage, its arrays staged or cloned (proxy_arrays.js).
  postMessage(call) {
    if (call.arrays !== null) this.pack(call);
    this.worker.postMessage(call.message);
  }

  // The next queued call to the worker, through the channel. A reply read from the channel is
  // received here; one by postMessage in onmessage. A call that could not be sent fails, and the
  // next goes on.
  dispatch() {
    if (this.inFlight !== null || this.queue.length === 0) return;
    const call = this.inFlight = this.queue.shift();
    this.channel.call(call.message, call.arrays, () => this.postMessage(call), () => this.inFlight === call)
      .then((reply) => reply && this.receive(reply), (error) => this.fail(call, error));
  }

  release(handle) {
    if (this.dead) return;
    const message = { op: 'release', id: this.nextId++, target: handle };
    this.post({ resolve() {}, reject() {}, objects: [], message, arrays: [] });
  }
}

// The client face of an object that lives in the worker.
class ProxiedObject {
  // checked: what the check of the method that made it returned, from which
  // its table entry's `known` gives its getters' values.
  constructor(connection, handle, type, checked) {
    this.connection = connection;
    this.handle = handle;
    this.type = type;
    this.checked = checked;
    this.state = PROXIED[type].known?.(checked) ?? {};
    this.creationError = null;  // the error that kept the worker from creating it
    // A disposable one is released in the worker by dispose(), or once collected.
    if (PROXIED[type].disposable) {
      this.life = new Lifetime(this, PROXIED[type].noun, { connection, handle }, release);
    }
    // checkCache's `ours`: a KVCache of the same worker.
    this.ours = (cache) => cache instanceof ProxiedObject && cache.type === 'KVCache' &&
      cache.connection === this.connection;
  }

  // As the in-thread classes': a disposed object throws (its calls reject: returnPromises).
  checkAlive(method) {
    this.life?.check(method);
  }

  call(method, args) {
    if (this.creationError) return Promise.reject(this.creationError);
    return this.connection.send(this, method, args);
  }

  create(method, args, type, checked) {
    if (this.creationError) throw this.creationError;
    const connection = this.connection;
    const created = new CLIENT_CLASSES[type](connection, connection.nextHandle++, type, checked);
    connection.send(this, method, args, created).catch((error) => { created.creationError = error; });
    return created;
  }

  // A `loads` method: resolves to the new object once the worker made it
  // (its state, every getter, comes with the reply).
  async load(method, args, type) {
    if (this.creationError) throw this.creationError;
    const connection = this.connection;
    const created = new CLIENT_CLASSES[type](connection, connection.nextHandle++, type, {});
    try {
      await connection.send(this, method, args, created);
    } catch (error) {
      created.dispose();
      throw error;
    }
    return created;
  }
}

// Frees an object in the worker after the calls sent before (no reply).
const release = ({ connection, handle }) => connection.release(handle);

function dispose() {
  this.life.end();
}

// One client class per table entry: its methods check, then send.
function clientClass(type) {
  const spec = PROXIED[type];
  const Client = class extends ProxiedObject {};
  for (const [method, check] of Object.entries(spec.calls)) {
    Client.prototype[method] = function proxiedCall(...args) {
      this.checkAlive(method);
      check?.(this, ...args);
      // Again: an argument's getter may have disposed this object meanwhile.
      this.checkAlive(method);
      return this.call(method, args);
    };
  }
  for (const [method, made] of Object.entries(spec.loads)) {
    Client.prototype[method] = function proxiedLoad(...args) {
      this.checkAlive(method);
      made.check?.(this, ...args);
      this.checkAlive(method);
      return this.load(method, args, made.type);
    };
  }
  returnPromises(Client, [...Object.keys(spec.calls), ...Object.keys(spec.loads)]);
  for (const [method, made] of Object.entries(spec.creates)) {
    Client.prototype[method] = function proxiedCreate(...args) {
      this.checkAlive(method);
      const checked = made.check(this, ...args);
      return this.create(method, args, made.type, checked);
    };
  }
  if (spec.disposable) Client.prototype.dispose = dispose;
  for (const key of spec.getters) {
    Object.defineProperty(Client.prototype, key, {
      // A module or cache the worker could not make (out of memory there)
      // throws that error from then on, as its calls reject with it.
      get() {
        if (this.creationError) throw this.creationError;
        this.checkAlive(`${spec.name}.${key}`);
        return this.state[key];
      },
    });
  }
  return Client;
}

const CLIENT_CLASSES = Object.fromEntries(Object.keys(PROXIED).map((type) => [type, clientClass(type)]));

// The library: handle 0 of its connection, which is replaced after the
// worker dies.
class ProxiedLibrary extends CLIENT_CLASSES.MHALibrary {
  constructor(connection, info, options, files, script) {
    super(connection, 0, 'MHALibrary');
    this.info = Object.freeze({ ...info, proxy: true });
    this.restart = () => new Connection(options, files, script);
    this.disposed = false;
  }

  checkAlive(method) {
    if (this.disposed) {
      throw new MHAError(`${method}: expected a live library, received one that was disposed`);
    }
    if (this.connection.dead) this.connection = this.restart();
    super.checkAlive(method);
  }

  // Ends the worker for good (its threads and memory with it); loadMHA() then loads afresh.
  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    forget(this);
    this.connection.die('lib.dispose() was called');
  }

  // Ends the worker now, even mid-forward (WASM cannot be interrupted
  // otherwise): as if it had died.
  terminate() {
    this.connection.die('lib.terminate() was called');
  }
}

// Starts the worker and loads the engine there; resolves to the library.
export async function startProxy(options, files) {
  const script = await workerScript(files.proxyWorker);
  const connection = new Connection(options, files, script);
  const info = await connection.loaded;
  return new ProxiedLibrary(connection, info, options, files, script);
}

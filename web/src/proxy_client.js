// The caller's side of the proxy: the same API as the in-thread library, run by the package's own
// Worker (proxy_worker.js; in Node a thread's, proxy_worker_node.js) so that the page's
// main thread, or Node's event loop, never blocks. Classes and methods come from
// proxy_table.js. Arguments are copied to the worker (only what the call uses: the table's `send`),
// results come back transferred; either way the caller owns them. A worker that dies rejects every
// pending call with an MHAError; the library's next call starts a new one (objects made in the old
// one are lost).
// Calls and replies go by postMessage, which costs no more per call than a mailbox in shared
// memory did (bench/proxy_cost.mjs, the commit that removed it). The typed arrays of a call are
// copied as docs/design.md promises (the caller keeps its arrays and may change them at once), but
// once, into one staging buffer the worker reads in place, which is faster than the structured
// clone that copies on both sides: where the page can share memory (cross-origin isolated, as the
// threaded build needs anyway) a SharedArrayBuffer, used again once the call that filled it has
// been answered, so steady calls allocate nothing; elsewhere (WebKit, Node) a fresh ArrayBuffer,
// handed over.
import { MHAError } from './errors.js';
import { alignUp } from './heap.js';
import { ARRAY, HANDLE, PROXIED, STEP, builtinType, errorFrom } from './proxy_table.js';
import { Lifetime } from './lifetime.js';
import { forget } from './load_once.js';
import { returnPromises } from './promise_methods.js';
import { CheckpointReading, listSteps, loadSteps } from './safetensors_load.js';
import { runSteps } from './steps.js';
import { shapeKey } from './validate.js';

// Staging buffers are at least this size, a power of two, so that one serves many calls.
const MIN_STAGING_BYTES = 1 << 16;
// Staging buffers up to this size (a W6 forward's 8 MB of inputs) are kept for the next call;
// a larger one (a checkpoint's bytes for loadSafetensors) is made to measure and dropped after
// its call, so that the page does not hold it for good.
const KEEP_BYTES = 1 << 24;

// Throws for an array whose buffer was detached (it would arrive empty). `path` names it.
function checkAttached(array, path) {
  if (array.buffer.byteLength !== 0 || array.byteLength !== 0 || array.length !== 0) return;
  try {
    structuredClone(array.buffer);
  } catch {
    throw new MHAError(`${path}: expected a live ArrayBuffer, received a detached one`);
  }
}

// A copy of only the array's own bytes, never a buffer shared with the caller.
function ownCopy(array) {
  const whole = array.buffer instanceof ArrayBuffer && array.byteOffset === 0 &&
    array.byteLength === array.buffer.byteLength;
  return whole ? array : array.slice();
}

// The staging of a connection's call arrays.
class ArraySender {
  constructor() {
    this.spare = null;  // a staging buffer no pending call uses
  }

  // { fields, transfer }: the message fields that carry `arrays` (in index order) and the buffers
  // to hand over with them.
  pack(arrays) {
    const types = arrays.map(builtinType);
    if (arrays.length === 0 || types.includes(null)) {
      return { fields: { arrays: arrays.map(ownCopy) }, transfer: [] };
    }
    const shared = globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';
    const offsets = [];
    let bytes = 0;
    for (const array of arrays) {
      offsets.push(bytes);
      bytes += alignUp(array.byteLength);
    }
    const buffer = shared ? this.take(bytes) : new ArrayBuffer(bytes);
    const staging = new Uint8Array(buffer);
    arrays.forEach((array, i) => {
      staging.set(new Uint8Array(array.buffer, array.byteOffset, array.byteLength), offsets[i]);
    });
    const views = arrays.map((array, i) => [types[i], offsets[i], array.length]);
    return { fields: { staged: { buffer, views } }, transfer: shared ? [] : [buffer] };
  }

  take(bytes) {
    if (this.spare !== null && this.spare.byteLength >= bytes) {
      const buffer = this.spare;
      this.spare = null;
      return buffer;
    }
    if (bytes > KEEP_BYTES) return new SharedArrayBuffer(bytes);
    return new SharedArrayBuffer(Math.max(MIN_STAGING_BYTES, 2 ** Math.ceil(Math.log2(bytes))));
  }

  // The call that used `buffer` has been answered: the worker no longer reads it.
  release(buffer) {
    if (buffer.byteLength <= KEEP_BYTES && buffer.byteLength > (this.spare?.byteLength ?? 0)) {
      this.spare = buffer;
    }
  }
}

// Arguments as a message: proxied objects become handles, typed arrays
// { [ARRAY]: index } into `arrays` (a Map of array -> index; self-attention
// passes one array as query, key and value, and it is sent once), objects their properties (tensors' data and shape or dims
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

// One worker and the calls pending in it, each named by an id (a Map key: ids stay exact far
// beyond any session's calls). The worker answers them one at a time in the order sent.
// `script`: how the worker starts (`env`'s workerScript; env_browser.js or env_node.js, whose
// startWorker starts it).
class Connection {
  constructor(options, files, script, env) {
    this.pending = new Map();   // id -> { resolve, reject, objects, staging }
    this.lives = new Set();     // the lifetimes of the objects made in its worker
    this.arrays = new ArraySender();
    this.nextId = 1;
    this.nextHandle = 1;
    this.dead = null;           // the MHAError once the worker is gone
    // While a call that reads a checkpoint in this thread runs (READS), it holds the channel: only
    // its own messages go; the others wait, in order, so that the worker runs every call in the
    // order made, as in-thread (where a load from bytes is done when its call returns).
    this.holder = null;
    this.waiting = [];          // posts that wait for the holder to finish
    this.started = false;       // whether the worker has said anything (so its script ran)
    this.loaded = new Promise((resolve, reject) => { this.settleLoad = { resolve, reject }; });
    const lock = env.endsUnheard && globalThis.navigator?.locks ?
      `mha-wasm-proxy-${Math.random().toString(36).slice(2)}` : null;
    this.loaded.then(() => {
      if (lock && !this.dead) navigator.locks.request(lock, () => this.die('it was terminated'));
    }, () => {});
    this.worker = this.startWorker(script, env);
    this.worker?.postMessage({ op: 'load', options: { threads: options.threads, build: options.build }, files, lock });
  }

  // The worker, started from `script`; null, and this connection dead, if it could not start.
  startWorker(script, env) {
    const notStarted = (detail) => this.die(new MHAError("mha-wasm: the engine's worker did not start: " +
                                                         `${env.workerStartFailure(script)} (${detail})`));
    let worker;
    try {
      worker = env.startWorker(script);
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
      this.settleLoad.reject(errorFrom(message.error));
      return this.die('it could not load the engine');
    }
    const call = this.pending.get(message.id);
    if (call === undefined) return;   // sent before the worker was ended
    this.pending.delete(message.id);
    if (call.staging) this.arrays.release(call.staging);
    for (const object of call.objects) {
      const state = message.states[object.handle];
      if (state) object.state = { ...object.state, ...state };
    }
    if (message.error) call.reject(errorFrom(message.error));
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
  }

  // Sends target.method(...args); `created` is the object a `creates` method returns; `transfer`:
  // whether the call's arrays are handed over (each the whole of its buffer) rather than copied;
  // `holder`: the holding call's, for its own messages.
  send(target, method, args, created, transfer = false, holder = null) {
    if (this.dead) return Promise.reject(this.dead);
    const objects = [target];
    const arrays = new Map();
    const message = { op: 'call', id: this.nextId++, target: target.handle, method,
      args: args.map((arg, i) => encode(arg, objects, `${method}: argument ${i + 1}`, arrays)) };
    if (created) {
      message.create = created.handle;
      objects.push(created);
    }
    const list = [...arrays.keys()];
    const packed = transfer ? { fields: { arrays: list }, transfer: list.map((array) => array.buffer) } :
      this.arrays.pack(list);
    Object.assign(message, packed.fields);
    const staging = packed.transfer.length === 0 ? message.staged?.buffer : undefined;
    return new Promise((resolve, reject) => this.post({ resolve, reject, objects, staging }, message,
      packed.transfer, holder));
  }

  // Posts `message` (handing over `transfer`), once the channel is free or `holder` holds it; a
  // message that cannot be cloned answers its call with that error.
  post(call, message, transfer = [], holder = null) {
    this.pending.set(message.id, call);
    try {
      if (this.holder === null || holder === this.holder) this.worker.postMessage(message, transfer);
      else {
        // Copied now: the caller may change its arrays once the call is made.
        const copy = structuredClone(message);
        this.waiting.push(() => this.dead || this.worker.postMessage(copy));
      }
    } catch ({ name, message: text }) {
      this.receive({ id: message.id, error: { name, message: text }, states: {} });
    }
  }

  release(handle, holder = null) {
    if (this.dead) return;
    this.post({ resolve() {}, reject() {}, objects: [] }, { op: 'release', id: this.nextId++, target: handle },
      [], holder);
  }

  // Runs run(holder) holding the channel (now, or once the calls made before have gone); resolves
  // as run's Promise does.
  hold(run) {
    return new Promise((resolve, reject) => {
      const start = () => {
        this.holder = {};
        try {
          Promise.resolve(run(this.holder)).finally(() => this.free()).then(resolve, reject);
        } catch (error) {
          this.free();
          reject(error);
        }
      };
      if (this.holder === null) start();
      else this.waiting.push(start);
    });
  }

  // Posts what waited, up to the next call that holds the channel.
  free() {
    this.holder = null;
    while (this.holder === null && this.waiting.length > 0) this.waiting.shift()();
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
      this.life = new Lifetime(this, PROXIED[type].noun, { connection, handle }, release, connection.lives);
    }
    // checkCache's `ours`: a KVCache of the same worker.
    this.ours = (cache) => cache instanceof ProxiedObject && cache.type === 'KVCache' &&
      cache.connection === this.connection;
  }

  // As the in-thread classes': a disposed object throws (its calls reject: returnPromises).
  checkAlive(method) {
    this.life?.check(method);
  }

  call(method, args, transfer = false, holder = null) {
    if (this.creationError) return Promise.reject(this.creationError);
    return this.connection.send(this, method, args, null, transfer, holder);
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

// The stand-in for a load's core in the worker (safetensors_load.js, CoreLoad) that the caller's
// thread feeds: the same steps, each sent to the worker; a tensor is read into a buffer of its
// own, handed over to the worker.
class RemoteLoad {
  // holder: the load's hold on the channel (Connection.hold); atOnce: whether every source is
  // bytes, which in-thread load within the call, so that a module disposed after it does not
  // affect the load (its release waits behind the load's steps).
  constructor(mha, options, holder, atOnce) {
    this.mha = mha;
    this.options = options;
    this.holder = holder;
    this.atOnce = atOnce;
    this.handle = null;  // the core's in the worker, once started
  }

  // As in-thread, a module disposed while a source is read rejects the load; `transfer` as send()'s.
  step(args, transfer = false) {
    if (!this.atOnce) this.mha.checkAlive('loadSafetensors');
    return this.mha.call(STEP, args, transfer, this.holder);
  }

  start(headers) {
    this.handle = this.mha.connection.nextHandle++;
    return this.step(['start', this.handle, headers, this.options]);
  }

  tensor(size) {
    const bytes = new Uint8Array(size);
    return {
      write: (chunk, at) => bytes.set(chunk, at),
      feed: (tensor, shard) => this.step(['feed', this.handle, tensor, bytes, shard], true),
      release() {},
    };
  }

  finish() {
    return this.step(['finish', this.handle]);
  }

  // Ends the core's load in the worker (unfinished, if it was not).
  dispose() {
    if (this.handle !== null) this.mha.connection.release(this.handle, this.holder);
  }
}

// The calls whose checkpoint the caller's thread reads, with the in-thread steps
// (safetensors_load.js): onProgress and the signal stay here; the worker gets the headers and each
// tensor the core takes, one at a time.
const READS = {
  loadSafetensors: (mha, { options, shards, read }, holder) => runSteps(loadSteps(
    new CheckpointReading('loadSafetensors', shards, read), new RemoteLoad(mha, options, holder,
    shards.every((shard) => shard instanceof Uint8Array)))),
  listAttentionModules: (lib, shards, holder) => runSteps(listSteps(
    new CheckpointReading('listAttentionModules', shards), (headers) => {
      lib.checkAlive('listAttentionModules');
      return lib.call(STEP, ['list', headers], false, holder);
    })),
};

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
      const checked = check?.(this, ...args);
      // Again: an argument's getter may have disposed this object meanwhile.
      this.checkAlive(method);
      if (method in READS) return this.connection.hold((holder) => READS[method](this, checked, holder));
      return this.call(method, spec.sends[method]?.(checked, ...args) ?? args);
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
        const value = this.state[key];
        return Array.isArray(value) && spec.mirror.includes(key) ? [...value] : value;
      },
    });
  }
  return Client;
}

const CLIENT_CLASSES = Object.fromEntries(Object.keys(PROXIED).map((type) => [type, clientClass(type)]));

// The library: handle 0 of its connection, which is replaced after the
// worker dies.
class ProxiedLibrary extends CLIENT_CLASSES.MHALibrary {
  constructor(connection, info, options, files, script, env) {
    super(connection, 0, 'MHALibrary');
    this.info = Object.freeze({ ...info, proxy: true });
    this.restart = () => new Connection(options, files, script, env);
    this.disposed = false;
  }

  checkAlive(method) {
    if (this.disposed) {
      throw new MHAError(`${method}: expected a live library, received one that was disposed`);
    }
    if (this.connection.dead) this.connection = this.restart();
    super.checkAlive(method);
  }

  // Ends the worker for good (its threads and memory with it) and disposes what was made there,
  // as in-thread; loadMHA() then loads afresh.
  dispose() {
    if (this.disposed) return;
    this.disposed = true;
    forget(this);
    this.connection.die(new MHAError('mha-wasm: the library was disposed (lib.dispose()) before ' +
                                     'the call finished; its modules and caches were disposed with it'));
    for (const life of [...this.connection.lives]) life.end(true);
  }

  // Ends the worker now, even mid-forward (WASM cannot be interrupted
  // otherwise): as if it had died.
  terminate() {
    this.connection.die('lib.terminate() was called');
  }
}

// Starts the worker (`env`: env_browser.js on a page, env_node.js in Node) and loads the engine
// there; resolves to the library.
export async function startProxy(options, files, env) {
  const script = await env.workerScript(files.proxyWorker);
  const connection = new Connection(options, files, script, env);
  const info = await connection.loaded;
  return new ProxiedLibrary(connection, info, options, files, script, env);
}

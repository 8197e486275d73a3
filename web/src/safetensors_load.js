// Reading a checkpoint's shards for a load (docs/design.md, "Loading large
// checkpoints in a page"): every shard's header first, then only the tensors
// the core asks for, each streamed into its own heap block, in file order;
// as steps (steps.js), which run at once for bytes in memory.
// onProgress({ loaded, total }) follows the bytes read; an AbortSignal
// cancels the reads, and the load rejects with an MHAError named AbortError.
// The same steps run in-thread and through the proxy (proxy_client.js): they
// differ only in where each tensor goes (a heap block fed to the core here,
// a buffer sent to the worker's core there).
import { callCore } from './core_call.js';
import { MHAError } from './errors.js';
import { Heap, heapViews } from './heap.js';
import { openSource, readHeader } from './safetensors_sources.js';
import { describe } from './validate.js';
import { copyHeader } from './weights.js';

// { onProgress, signal } of a load's options (undefined when not given).
export function checkReadOptions(options, name) {
  const { onProgress, signal } = options ?? {};
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new MHAError(`${name}: onProgress: expected a function, received ${describe(onProgress)}`);
  }
  if (signal !== undefined && !(typeof signal?.aborted === 'boolean' &&
                                typeof signal.addEventListener === 'function')) {
    throw new MHAError(`${name}: signal: expected an AbortSignal, received ${describe(signal)}`);
  }
  return { onProgress, signal };
}

// callerError before onProgress throws anything (a source may fail with undefined).
const NOT_THROWN = Symbol('onProgress has not thrown');

export class CheckpointReading {
  // shards: checked sources (weights.js, checkShards); `name`: the method's.
  constructor(name, shards, { onProgress, signal } = {}) {
    this.name = name;
    this.signal = signal;
    this.checkAborted();
    this.readers = shards.map(openSource);
    this.onProgress = onProgress;
    this.loaded = 0;
    this.total = undefined;
    this.callerError = NOT_THROWN;  // what onProgress threw (report)
    this.cancel = () => this.close();
    signal?.addEventListener('abort', this.cancel);
  }

  // How errors name shard i.
  shard(i) {
    return this.readers.length > 1 ? `bytes[${i}] (shard ${i})` : 'bytes';
  }

  checkAborted() {
    if (!this.signal?.aborted) return;
    const error = new MHAError(`${this.name}: aborted, the module unchanged`);
    error.name = 'AbortError';
    error.cause = this.signal.reason;
    throw error;
  }

  count(bytes) {
    this.loaded += bytes;
    if (this.total !== undefined && bytes > 0) this.report();
  }

  // Calls onProgress. What it throws is the caller's own: it rejects the load as thrown, where
  // read() would name a shard for it.
  report() {
    try {
      this.onProgress?.({ loaded: this.loaded, total: this.total });
    } catch (error) {
      this.callerError = error;
      throw error;
    }
  }

  // Steps (steps.js) of steps(reader of shard i), its errors named after it. An abort during a
  // wait between reads (through the proxy, while the worker takes a tensor) stops the load before
  // the next read: a Blob reader closed then would read a whole tensor anew.
  *read(i, steps) {
    this.checkAborted();
    try {
      const value = yield* steps(this.readers[i]);
      this.checkAborted();
      return value;
    } catch (error) {
      this.checkAborted();
      if (error === this.callerError) throw error;
      const message = error instanceof MHAError ? error.message : `${error?.name}: ${error?.message}`;
      throw new MHAError(`${this.name}: ${this.shard(i)}: ${message}`);
    }
  }

  // Steps to every shard's header: [{bytes, fileSize}] (weights.js, copyHeader).
  *headers() {
    const headers = [];
    for (let i = 0; i < this.readers.length; ++i) {
      headers.push(yield* this.read(i, (reader) => readHeader(reader, (n) => this.count(n))));
    }
    return headers;
  }

  // Steps reading the tensors `sources` ([{name, shard, begin, end}] from the
  // core) in file order, each into core.tensor(size) (CoreLoad's) and fed
  // (shard: how errors name its shard, null for a single file). `headers`:
  // headers()'s result, for the progress's total.
  *tensors(headers, sources, core) {
    const ordered = [...sources].sort((a, b) => a.shard - b.shard || a.begin - b.begin);
    this.total = this.loaded + this.readers.reduce((sum, reader, i) => {
      const mine = ordered.filter((s) => s.shard === i);
      if (!reader.sequential) return sum + mine.reduce((n, s) => n + s.end - s.begin, 0);
      return sum + Math.max(0, ...mine.map((s) => s.end - headers[i].bytes.length));
    }, 0);
    this.report();
    for (const { name, shard, begin, end } of ordered) {
      const tensor = core.tensor(end - begin);
      try {
        let at = 0;
        const sink = (chunk, n) => {
          if (chunk !== null) {
            tensor.write(chunk, at);
            at += chunk.length;
          }
          this.count(n);
        };
        const complete = yield* this.read(shard, function* read(reader) {
          return yield reader.read(begin, end, sink);
        });
        if (!complete) {
          throw new MHAError(`${this.name}: ${this.shard(shard)}: the file ended before the end ` +
                             `of tensor '${name}' (bytes ${begin} to ${end}): truncated?`);
        }
        yield tensor.feed(name, this.readers.length > 1 ? this.shard(shard) : null);
      } finally {
        tensor.release();
      }
    }
  }

  close() {
    this.signal?.removeEventListener('abort', this.cancel);
    for (const reader of this.readers) reader.close();
  }
}

// Steps (steps.js) of a load: the shards' headers, core.start(headers) (the
// tensors to read), each tensor read and fed, core.finish(); `core` is a
// CoreLoad or the proxy's stand-in for one in its worker (proxy_client.js),
// whose steps resolve later. A load that fails or is aborted ends unfinished:
// the module stays as it was.
export function* loadSteps(reading, core) {
  try {
    const headers = yield* reading.headers();
    const sources = yield core.start(headers);
    yield* reading.tensors(headers, sources, core);
    reading.checkAborted();
    yield core.finish();
  } finally {
    reading.close();
    core.dispose();
  }
}

// Steps (steps.js) of listAttentionModules: the shards' headers, then list(headers).
export function* listSteps(reading, list) {
  try {
    return yield list(yield* reading.headers());
  } finally {
    reading.close();
  }
}

// The core's side of a load into a module (the binding's SafetensorsLoad):
// `binding()` gives the module's binding (and throws once it is disposed),
// `name` is the method's, `options` the core's weight options.
export class CoreLoad {
  constructor(wasm, binding, name, options) {
    this.wasm = wasm;
    this.binding = binding;
    this.name = name;
    this.options = options;
    this.load = new wasm.SafetensorsLoad();
  }

  // The tensors to read, [{name, shard, begin, end}], from the shards'
  // headers (copyHeader's); the new weights are allocated.
  start(headers) {
    return callCore(this.wasm, this.name, (heap, result) => this.binding().startLoad(this.load,
      headers.map((header) => copyHeader(heap, header)), this.options, result));
  }

  // A heap block of `size` bytes for a tensor: write(chunk, at) fills it,
  // feed(tensor, shard) hands it to the core, release() frees it.
  tensor(size) {
    const heap = new Heap(this.wasm);
    const ptr = size > 0 ? heap.reserve(size) : 0;
    return {
      // The views again each time: the heap may have grown meanwhile.
      write: (chunk, at) => heapViews(this.wasm, ptr + at + chunk.length).u8.set(chunk, ptr + at),
      feed: (tensor, shard) => callCore(this.wasm, shard === null ? this.name : `${this.name}: ${shard}`,
        (_, result) => this.binding().feedLoad(this.load, tensor, ptr, result)),
      release: () => heap.release(),
    };
  }

  // A tensor's bytes at hand (the proxy's worker receives them so).
  feed(tensor, bytes, shard) {
    const block = this.tensor(bytes.length);
    try {
      block.write(bytes, 0);
      block.feed(tensor, shard);
    } finally {
      block.release();
    }
  }

  // Once every tensor is fed: the new weights replace the module's.
  finish() {
    callCore(this.wasm, this.name, (_, result) => this.binding().finishLoad(this.load, result));
  }

  dispose() {
    this.load?.delete();
    this.load = null;
  }
}

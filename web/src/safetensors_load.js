// Reading a checkpoint's shards for a load (docs/design.md, "Loading large
// checkpoints in a page"): every shard's header first, then only the tensors
// the core asks for, each streamed into its own heap block, in file order;
// as steps (steps.js), which run at once for bytes in memory.
// onProgress({ loaded, total }) follows the bytes read; an AbortSignal
// cancels the reads, and the load rejects with an MHAError named AbortError.
import { MHAError } from './errors.js';
import { Heap, heapViews } from './heap.js';
import { openSource, readHeader } from './safetensors_sources.js';
import { describe } from './validate.js';

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
    if (this.total !== undefined && bytes > 0) this.onProgress?.({ loaded: this.loaded, total: this.total });
  }

  // Steps (steps.js) of steps(reader of shard i), its errors named after it.
  *read(i, steps) {
    try {
      const value = yield* steps(this.readers[i]);
      this.checkAborted();
      return value;
    } catch (error) {
      this.checkAborted();
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
  // core) in file order, each into a heap block of its own that lives while
  // feed(name, ptr, shard) runs (ptr 0 for an empty one; shard: how errors
  // name its shard, null for a single file). `headers`: headers()'s result,
  // for the progress's total.
  *tensors(wasm, headers, sources, feed) {
    const ordered = [...sources].sort((a, b) => a.shard - b.shard || a.begin - b.begin);
    this.total = this.loaded + this.readers.reduce((sum, reader, i) => {
      const mine = ordered.filter((s) => s.shard === i);
      if (!reader.sequential) return sum + mine.reduce((n, s) => n + s.end - s.begin, 0);
      return sum + Math.max(0, ...mine.map((s) => s.end - headers[i].bytes.length));
    }, 0);
    this.onProgress?.({ loaded: this.loaded, total: this.total });
    for (const { name, shard, begin, end } of ordered) {
      const heap = new Heap(wasm);
      try {
        const ptr = end > begin ? heap.reserve(end - begin) : 0;
        let at = ptr;
        const sink = (chunk, n) => {
          if (chunk !== null) {
            heapViews(wasm, at + chunk.length).u8.set(chunk, at);
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
        feed(name, ptr, this.readers.length > 1 ? this.shard(shard) : null);
      } finally {
        heap.release();
      }
    }
  }

  close() {
    this.signal?.removeEventListener('abort', this.cancel);
    for (const reader of this.readers) reader.close();
  }
}

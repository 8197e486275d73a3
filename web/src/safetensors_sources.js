// Where a .safetensors file's bytes come from (docs/design.md, "Loading large
// checkpoints in a page"): bytes in memory, a Blob or File, a Response, or a
// ReadableStream of Uint8Arrays. Each is read front to back: its header
// first, then only the byte ranges asked for, so no whole file is ever held
// (a Blob is sliced, a stream is read past the bytes not asked for and
// cancelled after the last one).
import { MHAError } from './errors.js';
import { describe } from './validate.js';

const MAX_HEADER_BYTES = 100 * 2 ** 20;  // the core refuses longer headers
// A stream's length is not known: the core checks offsets against this, and
// reading reports a stream that ends early.
const UNKNOWN_SIZE = Number.MAX_SAFE_INTEGER;

const isBlob = (x) => typeof Blob !== 'undefined' && x instanceof Blob;
const isResponse = (x) => typeof Response !== 'undefined' && x instanceof Response;
const isStream = (x) => typeof ReadableStream !== 'undefined' && x instanceof ReadableStream;

// Whether `value` is one file's source (bytes, Blob, Response or stream).
function isSource(value) {
  return value instanceof ArrayBuffer || value instanceof Uint8Array || isBlob(value) ||
    isResponse(value) || isStream(value);
}

// `value` checked as one file's source (`what` names it in errors).
export function checkSource(value, what) {
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (isResponse(value) && value.bodyUsed) {
    throw new MHAError(`${what}: the Response's body was already read`);
  }
  if (isResponse(value) && !value.ok) {
    throw new MHAError(`${what}: the Response has status ${value.status} ${value.statusText}` +
                       (value.url ? ` (${value.url})` : ''));
  }
  if (isStream(value) && value.locked) {
    throw new MHAError(`${what}: the ReadableStream is locked (already being read)`);
  }
  if (isSource(value)) return value;
  throw new MHAError(`${what}: expected a Uint8Array, an ArrayBuffer, a Blob, a Response or a ` +
                     `ReadableStream, received ${describe(value)}`);
}

// The file's size from a Response's Content-Length (unless the body is
// encoded: then the header gives the encoded length).
function responseSize(response) {
  const length = response.headers.get('content-length');
  if (length === null || response.headers.get('content-encoding')) return UNKNOWN_SIZE;
  const size = Number(length);
  return Number.isSafeInteger(size) ? size : UNKNOWN_SIZE;
}

// Reads a stream of Uint8Arrays front to back.
class StreamReader {
  constructor(stream, size) {
    this.reader = stream.getReader();
    this.size = size;
    this.sequential = true;  // reaching a range reads the bytes before it
    this.position = 0;
    this.pending = new Uint8Array(0);  // read but not yet used
  }

  // Calls sink(chunk) with the bytes [begin, end), in order; skips the bytes
  // before `begin`. Returns false if the stream ended first.
  async read(begin, end, sink) {
    while (this.position < end) {
      if (this.pending.length === 0) {
        const { done, value } = await this.reader.read();
        if (done) return false;
        if (!(value instanceof Uint8Array)) {
          throw new MHAError(`expected a stream of Uint8Arrays, received ${describe(value)}`);
        }
        this.pending = value;
      }
      const skip = Math.min(Math.max(begin - this.position, 0), this.pending.length);
      const take = Math.min(end - this.position - skip, this.pending.length - skip);
      if (take > 0) sink(this.pending.subarray(skip, skip + take), skip + take);
      else sink(null, skip);
      this.pending = this.pending.subarray(skip + take);
      this.position += skip + take;
    }
    return true;
  }

  close() {
    this.reader.cancel().catch(() => {});
  }
}

// Reads a Blob's byte ranges through slices of it.
class BlobReader {
  constructor(blob) {
    this.blob = blob;
    this.size = blob.size;
    this.sequential = false;
    this.stream = null;
  }

  async read(begin, end, sink) {
    if (end > this.size) return false;
    this.stream = new StreamReader(this.blob.slice(begin, end).stream(), end - begin);
    const complete = await this.stream.read(0, end - begin, sink);
    this.stream = null;
    return complete;
  }

  close() {
    this.stream?.close();
  }
}

class BytesReader {
  constructor(bytes) {
    this.bytes = bytes;
    this.size = bytes.byteLength;
    this.sequential = false;
  }

  // At once, not a Promise: a load from bytes runs in its call (steps.js).
  read(begin, end, sink) {
    if (end > this.size) return false;
    sink(this.bytes.subarray(begin, end), end - begin);
    return true;
  }

  close() {}
}

// A reader of a checked source: { size, sequential, read(begin, end, sink), close() }.
// read() calls sink(chunk, consumed) for the bytes it takes (chunk null
// when it skipped them) and returns (bytes) or resolves to (the others)
// false if the source ended before `end`; reads must come in increasing
// order.
export function openSource(source) {
  if (source instanceof Uint8Array) return new BytesReader(source);
  if (isBlob(source)) return new BlobReader(source);
  if (isResponse(source) && source.body === null) return new BytesReader(new Uint8Array(0));
  if (isResponse(source)) return new StreamReader(source.body, responseSize(source));
  return new StreamReader(source, UNKNOWN_SIZE);
}

// Steps (steps.js) to a file's header, as copyHeader takes it: { bytes,
// fileSize }. `bytes` is its length field and JSON header (only the length
// field when that length is impossible, or all there is of a file shorter
// than 8 bytes: the core reports both). `count(n)` is told of bytes read.
export function* readHeader(reader, count) {
  const parts = [];
  const collect = (chunk, consumed) => {
    if (chunk !== null) parts.push(chunk.slice());
    count(consumed);
  };
  const whole = yield reader.read(0, Math.min(8, reader.size), collect);
  const first = concat(parts);
  if (!whole || first.length < 8) return { bytes: first, fileSize: first.length };
  const length = Number(new DataView(first.buffer).getBigUint64(0, true));
  if (length > Math.min(reader.size - 8, MAX_HEADER_BYTES)) return { bytes: first, fileSize: reader.size };
  if (!(yield reader.read(8, 8 + length, collect))) {
    throw new MHAError(`the file ended inside its ${length}-byte header`);
  }
  return { bytes: concat(parts), fileSize: reader.size };
}

const byteCount = (parts) => parts.reduce((n, p) => n + p.length, 0);

function concat(parts) {
  const out = new Uint8Array(byteCount(parts));
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

// How the typed arrays of a proxied call reach the worker: by copy, as docs/design.md promises (the
// caller keeps its arrays and may change them at once), but cheaply. Where the page can share
// memory (cross-origin isolated, as the threaded build needs anyway) the client copies each array
// once into a SharedArrayBuffer that the worker reads in place; elsewhere postMessage clones them.
// A structured clone allocates afresh on both sides and is several times slower than one copy into
// shared memory, for large inputs (a forward's megabytes) and a little for small ones, so every
// call with arrays that goes by postMessage uses it (figures: commit 4d49fdf); most small calls
// go through proxy_channel.js instead. A staging buffer is used again once the call that filled it has been
// answered, so steady calls allocate nothing.
// In a message, each array is { [ARRAY]: index } and the message carries either
// `staged: { buffer, views: [[type, byteOffset, length], ...] }` or `arrays: [copies]`.
import { MHAError } from './errors.js';
import { alignUp } from './heap.js';

export const ARRAY = '__mhaArray';

// Only arrays of these builtin types are staged (a view of the same type is made in the worker);
// any other view in a call (a subclass, a DataView) sends the whole call by clone.
const TYPES = new Set(['Int8Array', 'Uint8Array', 'Uint8ClampedArray', 'Int16Array', 'Uint16Array',
  'Int32Array', 'Uint32Array', 'Float32Array', 'Float64Array', 'BigInt64Array', 'BigUint64Array']);
const MIN_STAGING_BYTES = 1 << 16;
// Staging buffers up to this size (a W6 forward's 8 MB of inputs) are kept for the next call;
// a larger one (a checkpoint's bytes for loadSafetensors) is made to measure and dropped after
// its call, so that the page does not hold it for good.
const KEEP_BYTES = 1 << 24;

export function builtinType(array) {
  const name = array.constructor?.name;
  return TYPES.has(name) && Object.getPrototypeOf(array) === globalThis[name].prototype ? name : null;
}

// Throws for an array whose buffer was detached (it would arrive empty). `path` names it.
export function checkAttached(array, path) {
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

// The client's side: one per worker connection.
export class ArraySender {
  constructor() {
    this.spare = null;  // a staging buffer no pending call uses
  }

  // The message fields that carry `arrays` (in index order).
  pack(arrays) {
    const types = arrays.map(builtinType);
    const shared = globalThis.crossOriginIsolated === true && typeof SharedArrayBuffer === 'function';
    if (arrays.length === 0 || !shared || types.includes(null)) return { arrays: arrays.map(ownCopy) };
    const offsets = [];
    let bytes = 0;
    for (const array of arrays) {
      offsets.push(bytes);
      bytes += alignUp(array.byteLength);
    }
    const buffer = this.take(bytes);
    const staging = new Uint8Array(buffer);
    arrays.forEach((array, i) => {
      staging.set(new Uint8Array(array.buffer, array.byteOffset, array.byteLength), offsets[i]);
    });
    return { staged: { buffer, views: arrays.map((array, i) => [types[i], offsets[i], array.length]) } };
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

// The worker's side: the arrays of a message, in index order.
export function receivedArrays({ staged, arrays }) {
  if (staged === undefined) return arrays;
  return staged.views.map(([type, offset, length]) =>
    new globalThis[type](staged.buffer, offset, length));
}

// `value` with each { [ARRAY]: i } as arrays[i]; `other(object)` may stand in for any other
// object (the worker turns handles into the objects they address), undefined if not.
export function placeArrays(value, arrays, other = () => undefined) {
  if (Array.isArray(value)) return value.map((v) => placeArrays(v, arrays, other));
  if (value === null || typeof value !== 'object' || value instanceof ArrayBuffer) return value;
  if (ARRAY in value) return arrays[value[ARRAY]];
  const found = other(value);
  if (found !== undefined) return found;
  return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, placeArrays(v, arrays, other)]));
}

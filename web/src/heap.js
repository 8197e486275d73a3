// Copies between JS typed arrays and the WASM heap. Memory growth (possibly
// on a worker thread) replaces the memory's buffer: an unshared one is
// detached, a shared one keeps its old length. Views are reused while they
// cover the bytes wanted (reading a shared memory's buffer costs about a
// microsecond) and made again from the current buffer otherwise.
import { MHAError } from './errors.js';
import { checkShape, numElements, shapeOf } from './validate.js';

// The threaded build exports its shared memory; the other's HEAPU8 is
// replaced on growth.
export function memoryBuffer(wasm) {
  return wasm.wasmMemory ? wasm.wasmMemory.buffer : wasm.HEAPU8.buffer;
}

// Blocks laid out in the WASM heap and in the proxy's shared buffers start at
// multiples of 16 bytes, so that a view of any typed array (and SIMD loads)
// can read them in place.
export const alignUp = (bytes) => Math.ceil(bytes / 16) * 16;

const views = new WeakMap();

// { u8, u32, f32 }: views of the whole heap that reach at least byte `end`.
export function heapViews(wasm, end) {
  let v = views.get(wasm);
  if (v === undefined || v.u8.byteLength < end) {
    const buffer = memoryBuffer(wasm);
    v = { u8: new Uint8Array(buffer), u32: new Uint32Array(buffer), f32: new Float32Array(buffer) };
    views.set(wasm, v);
  }
  return v;
}

// The first `byteLength` bytes of `array` as a Uint8Array. The core reads as
// many bytes as the shape it is given says, so data that has fewer bytes by
// now (a buffer detached, e.g. by a getter that ran after validation) is an
// error, never a read past the copy.
export function sourceBytes(array, byteLength) {
  let source = null;
  try {
    source = new Uint8Array(array.buffer, array.byteOffset, byteLength);
  } catch {
    // A detached buffer, or one smaller than byteLength: reported below.
  }
  if (source === null || array.byteLength < byteLength) {
    throw new MHAError(`data: expected ${byteLength} bytes, received ${array.byteLength} ` +
                       '(was its buffer detached or resized during the call?)');
  }
  return source;
}

// A heap block of `byteLength` bytes (free it with wasm.free).
export function allocate(wasm, byteLength) {
  const ptr = wasm.allocate(byteLength) >>> 0;
  if (ptr === 0) {
    throw new MHAError(`out of memory: could not allocate ${byteLength} bytes ` +
                       'in the WebAssembly heap');
  }
  return ptr;
}

// A JS-owned copy of `count` floats at `ptr`. new + set, not slice(): on a
// shared (threaded) heap, slice() takes a slower path.
export function copyOutFloat32(wasm, ptr, count) {
  const copy = new Float32Array(count);
  const start = ptr >>> 2;
  copy.set(heapViews(wasm, ptr + 4 * count).f32.subarray(start, start + count));
  return copy;
}

export class Heap {
  constructor(wasm) {
    this.wasm = wasm;
    // Every block allocated by the current call, freed together by release().
    this.blocks = [];
    // Typed array -> its heap copy, so that each is copied once per call.
    this.copies = new Map();
  }

  // Copies the first `byteLength` bytes of `array` (all of it by default)
  // into a fresh heap block; returns its address.
  copyIn(array, byteLength = array.byteLength) {
    const source = sourceBytes(array, byteLength);
    const ptr = this.reserve(byteLength);
    heapViews(this.wasm, ptr + byteLength).u8.set(source, ptr);
    return ptr;
  }

  // A fresh heap block of `byteLength` bytes, freed with the others.
  reserve(byteLength) {
    const ptr = allocate(this.wasm, byteLength);
    this.blocks.push(ptr);
    return ptr;
  }

  // The binding's {ptr, shape} descriptor of a float32 tensor. `data` and
  // its shape are read once here, so a getter cannot pass the core a shape
  // larger than the block. Data seen before in this call is copied once.
  copyTensor(tensor) {
    const data = tensor.data;
    // Checked again: a getter may return other dims than validation saw.
    const shape = checkShape(Array.from(shapeOf(tensor)), 'tensor');
    const byteLength = numElements(shape) * 4;
    let copy = this.copies.get(data);
    if (copy === undefined || copy.byteLength < byteLength) {
      copy = { ptr: this.copyIn(data, byteLength), byteLength };
      this.copies.set(data, copy);
    }
    return { ptr: copy.ptr, shape };
  }

  release() {
    for (const ptr of this.blocks) this.wasm.free(ptr);
    this.blocks = [];
    this.copies.clear();
  }
}

// Copies between JS typed arrays and the WASM heap. Views are made from the
// memory's current buffer on every use: memory growth (possibly on a worker
// thread) replaces the buffer and detaches older views.
import { MHAError } from './errors.js';
import { checkShape, numElements } from './validate.js';

// The threaded build exports its shared memory; the other's HEAPU8 is
// replaced on growth.
export function memoryBuffer(wasm) {
  return wasm.wasmMemory ? wasm.wasmMemory.buffer : wasm.HEAPU8.buffer;
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
  // into a fresh heap block; returns its address. The core reads as many
  // bytes as the shape it is given says, so blocks are sized from that shape,
  // and data that has fewer bytes by now (a buffer detached, e.g. by a getter
  // that ran after validation) is an error, never a read past the block.
  copyIn(array, byteLength = array.byteLength) {
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
    const ptr = this.wasm.allocate(byteLength) >>> 0;
    if (ptr === 0) {
      throw new MHAError(`out of memory: could not allocate ${byteLength} bytes ` +
                         'in the WebAssembly heap');
    }
    this.blocks.push(ptr);
    new Uint8Array(memoryBuffer(this.wasm), ptr, byteLength).set(source);
    return ptr;
  }

  // The binding's {ptr, shape, bool} descriptor of a tensor or mask (undefined
  // stays undefined). `data` and `shape` are read once here, so a getter cannot
  // pass the core a shape larger than the block. Data seen before in this call
  // (self-attention passes query as key and value) is copied once.
  copyTensor(tensor) {
    if (tensor === undefined) return undefined;
    const data = tensor.data;
    // Checked again: a getter may return other dims than validation saw.
    const shape = checkShape(Array.from(tensor.shape), 'tensor');
    const bool = data instanceof Uint8Array;
    const byteLength = numElements(shape) * (bool ? 1 : 4);
    let copy = this.copies.get(data);
    if (copy === undefined || copy.byteLength < byteLength) {
      copy = { ptr: this.copyIn(data, byteLength), byteLength };
      this.copies.set(data, copy);
    }
    return { ptr: copy.ptr, shape, bool };
  }

  // A JS-owned copy of `count` floats at `ptr`. new + set, not slice(): on a
  // shared (threaded) heap, slice() copies about 3x slower.
  copyOutFloat32(ptr, count) {
    const copy = new Float32Array(count);
    copy.set(new Float32Array(memoryBuffer(this.wasm), ptr >>> 0, count));
    return copy;
  }

  release() {
    for (const ptr of this.blocks) this.wasm.free(ptr);
    this.blocks = [];
    this.copies.clear();
  }
}

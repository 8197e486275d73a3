// Copies between JS typed arrays and the WASM heap. Views are made from the
// memory's current buffer on every use: memory growth (possibly on a worker
// thread) replaces the buffer and detaches older views.
import { MHAError } from './errors.js';

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

  // Copies `array` into a fresh heap block; returns its address.
  copyIn(array) {
    const ptr = this.wasm.allocate(array.byteLength) >>> 0;
    if (ptr === 0) {
      throw new MHAError(`out of memory: could not allocate ${array.byteLength} bytes ` +
                         'in the WebAssembly heap');
    }
    this.blocks.push(ptr);
    new Uint8Array(memoryBuffer(this.wasm), ptr, array.byteLength)
      .set(new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
    return ptr;
  }

  // The binding's {ptr, shape, bool} descriptor of a tensor or mask (undefined
  // stays undefined). Data seen before in this call (self-attention passes
  // query as key and value) is copied once.
  copyTensor(tensor) {
    if (tensor === undefined) return undefined;
    let ptr = this.copies.get(tensor.data);
    if (ptr === undefined) {
      ptr = this.copyIn(tensor.data);
      this.copies.set(tensor.data, ptr);
    }
    return { ptr, shape: tensor.shape, bool: tensor.data instanceof Uint8Array };
  }

  // A JS-owned copy of `count` floats at `ptr`.
  copyOutFloat32(ptr, count) {
    return new Float32Array(memoryBuffer(this.wasm), ptr >>> 0, count).slice();
  }

  release() {
    for (const ptr of this.blocks) this.wasm.free(ptr);
    this.blocks = [];
    this.copies.clear();
  }
}

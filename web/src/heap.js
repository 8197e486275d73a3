// Copies between JS typed arrays and the WASM heap. Views are made from the
// memory's current buffer on every use: memory growth (possibly on a worker
// thread) replaces the buffer and detaches older views.
import { MHAError } from './errors.js';

export class Heap {
  constructor(wasm) {
    this.wasm = wasm;
    // Every block allocated by the current call, freed together by release().
    this.blocks = [];
  }

  buffer() {
    return this.wasm.wasmMemory ? this.wasm.wasmMemory.buffer : this.wasm.HEAPU8.buffer;
  }

  // Copies `array` into a fresh heap block; returns its address.
  copyIn(array) {
    const ptr = this.wasm.allocate(array.byteLength) >>> 0;
    if (ptr === 0) {
      throw new MHAError(`out of memory: could not allocate ${array.byteLength} bytes ` +
                         'in the WebAssembly heap');
    }
    this.blocks.push(ptr);
    new Uint8Array(this.buffer(), ptr, array.byteLength)
      .set(new Uint8Array(array.buffer, array.byteOffset, array.byteLength));
    return ptr;
  }

  // {ptr, shape} descriptor of a tensor or mask for the binding; tensors seen
  // before in this call (self-attention passes query as key and value) are
  // copied once.
  describe(tensor, seen = new Map()) {
    if (tensor === undefined) return undefined;
    let ptr = seen.get(tensor.data);
    if (ptr === undefined) {
      ptr = this.copyIn(tensor.data);
      seen.set(tensor.data, ptr);
    }
    return { ptr, shape: tensor.shape, bool: tensor.data instanceof Uint8Array };
  }

  // A JS-owned copy of `count` floats at `ptr`.
  copyOutFloat32(ptr, count) {
    return new Float32Array(this.buffer(), ptr >>> 0, count).slice();
  }

  release() {
    for (const ptr of this.blocks) this.wasm.free(ptr);
    this.blocks = [];
  }
}

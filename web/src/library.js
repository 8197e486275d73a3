// What loadMHA() resolves to: one instantiated WASM build and its thread pool.
import { callCore } from './core_call.js';
import { MultiheadAttention } from './multihead_attention.js';
import {
  checkBoolean, checkMask, checkOptionsObject, checkTensor, describe,
} from './validate.js';
import { MHAError } from './errors.js';
import { VERSION } from './version.js';

const SDPA_KEYS = ['attnMask', 'isCausal', 'scale'];

export class MHALibrary {
  constructor(wasm, build) {
    this.wasm = wasm;
    const core = wasm.info();
    // { version, build: 'simd-threaded' | 'simd', threads, simd, target }
    this.info = Object.freeze({
      version: VERSION,
      build,
      threads: core.threads,
      simd: core.target === 'WASM',
      target: core.target,
    });
  }

  createMultiheadAttention(config) {
    return new MultiheadAttention(this.wasm, config);
  }

  // torch.nn.functional.scaled_dot_product_attention (PyTorch 2.x): a bool
  // attnMask is true where a query MAY attend.
  async scaledDotProductAttention(query, key, value, options) {
    const o = checkOptionsObject(options, 'scaledDotProductAttention options', SDPA_KEYS);
    checkTensor(query, 'query');
    checkTensor(key, 'key');
    checkTensor(value, 'value');
    const attnMask = checkMask(o.attnMask, 'attnMask');
    const scale = o.scale === undefined ? 0 : o.scale;
    if (typeof scale !== 'number' || !Number.isFinite(scale) || scale < 0) {
      throw new MHAError(`scale: expected a positive number (or undefined for ` +
                         `1/sqrt(E)), received ${describe(scale)}`);
    }
    const flags = { is_causal: checkBoolean(o.isCausal, 'isCausal', false), scale };
    const { output } = callCore(this.wasm, 'scaledDotProductAttention', (heap, result) => {
      const seen = new Map();
      return this.wasm.scaledDotProductAttention(heap.describe(query, seen),
        heap.describe(key, seen), heap.describe(value, seen),
        { ...flags, attn_mask: heap.describe(attnMask, seen) }, result);
    });
    return output;
  }

  // Diagnostics: the WASM heap's top (sbrk), bytes malloc'd, memory size.
  heapInfo() {
    const { heapTop, inUseBytes } = this.wasm.heapInfo();
    const memory = this.wasm.wasmMemory ? this.wasm.wasmMemory.buffer : this.wasm.HEAPU8.buffer;
    return { heapTop, inUseBytes, memoryBytes: memory.byteLength };
  }
}

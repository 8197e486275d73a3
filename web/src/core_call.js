// Runs one binding call: turns its status code into an MHAError carrying the
// core's message, copies results out once, and frees every heap block the
// call used, whatever happens.
import { MHAError } from './errors.js';
import { Heap } from './heap.js';
import { numElements } from './validate.js';

export const STATUS_OK = 0;

export function callCore(wasm, what, call) {
  const heap = new Heap(wasm);
  const result = new wasm.CallResult();
  try {
    const code = call(heap, result);
    if (code !== STATUS_OK) {
      const message = result.message();
      throw new MHAError(message.startsWith(`${what}: `) ? message : `${what}: ${message}`);
    }
    return {
      output: copyOut(heap, result.outputPtr(), result.outputShape()),
      weights: copyOut(heap, result.weightsPtr(), result.weightsShape()),
      value: result.value(),  // a plain JS result (e.g. a list), or undefined
    };
  } finally {
    result.delete();
    heap.release();
  }
}

// null when the core produced no tensor (e.g. weights not asked for).
function copyOut(heap, ptr, shape) {
  if (shape.length === 0) return null;
  return { data: heap.copyOutFloat32(ptr, numElements(shape)), shape };
}

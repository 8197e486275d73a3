// Runs binding calls: turns a status code into an MHAError carrying the
// core's message, and frees every heap block a call used, whatever happens.
import { MHAError } from './errors.js';
import { Heap } from './heap.js';

export const STATUS_OK = 0;

// Throws the MHAError of a failed call (`code` not STATUS_OK), its message
// prefixed with `what` unless the core named it already.
export function checkStatus(code, result, what) {
  if (code === STATUS_OK) return;
  const message = result.message();
  throw new MHAError(message.startsWith(`${what}: `) ? message : `${what}: ${message}`);
}

// For calls that take JS objects (whose getters may run further calls):
// call(heap, result) gets a Heap for its copies and a CallResult of its own;
// returns the call's plain JS result (result.value()), if any.
export function callCore(wasm, what, call) {
  const heap = new Heap(wasm);
  const result = new wasm.CallResult();
  try {
    checkStatus(call(heap, result), result, what);
    return result.value();
  } finally {
    result.delete();
    heap.release();
  }
}

// A new Embind object of class `Binding` that create(binding, result, heap)
// fills (a status, as for callCore); deleted again if that fails.
export function newBinding(wasm, Binding, what, create) {
  const binding = new Binding();
  try {
    callCore(wasm, what, (heap, result) => create(binding, result, heap));
  } catch (error) {
    binding.delete();
    throw error;
  }
  return binding;
}

// One CallResult per module instance, for calls that run no JS between the
// binding call and reading its result (call frames, truncate): creating and
// deleting one per call costs more than a small call computes.
const shared = new WeakMap();

export function sharedResult(wasm) {
  let result = shared.get(wasm);
  if (result === undefined) {
    result = new wasm.CallResult();
    shared.set(wasm, result);
  }
  return result;
}

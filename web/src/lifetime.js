// The lifetime of every disposable object (a module or a cache, in the calling thread or through
// the proxy): it holds something outside the JS heap (a C++ object in the WASM heap, an object in
// the proxy's worker), freed once, by dispose() or, when the object is dropped undisposed, once
// the garbage collector has collected it.
import { MHAError } from './errors.js';

const forgotten = new FinalizationRegistry(({ held, free }) => free(held));

const deleteBinding = (binding) => binding.delete();

export class Lifetime {
  // owner: the object whose collection frees `held` (`held` and `free` must not refer to it, or
  // it would never be collected); noun: what a disposed owner is called in messages;
  // free(held): frees it (default: deletes an Embind object).
  constructor(owner, noun, held, free = deleteBinding) {
    this.noun = noun;
    this.held = held;
    this.free = free;
    forgotten.register(owner, { held, free }, this);
  }

  // What it holds; throws an MHAError naming `what` once disposed.
  check(what) {
    if (this.held === null) {
      throw new MHAError(`${what}: expected a live ${this.noun}, received one that was disposed`);
    }
    return this.held;
  }

  // dispose(): frees what it holds now (a second call does nothing).
  end() {
    if (this.held === null) return;
    forgotten.unregister(this);
    const held = this.held;
    this.held = null;
    this.free(held);
  }
}

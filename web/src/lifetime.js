// The lifetime of every disposable object (a module or a cache, in the calling thread or through
// the proxy): it holds something outside the JS heap (a C++ object in the WASM heap, an object in
// the proxy's worker), freed once, by dispose() or, when the object is dropped undisposed, once
// the garbage collector has collected it. An in-thread library's dispose() ends the lifetimes
// of everything made from it (livesOf).
import { MHAError } from './errors.js';

const forgotten = new FinalizationRegistry((life) => life.end());

// The live lifetimes of one instantiated build (a Set, keyed by its module).
const lives = new WeakMap();
export function livesOf(wasm) {
  if (!lives.has(wasm)) lives.set(wasm, new Set());
  return lives.get(wasm);
}

const deleteBinding = (binding) => binding.delete();

export class Lifetime {
  // owner: the object whose collection frees `held` (`held` and `free` must not refer to it, or
  // it would never be collected); noun: what a disposed owner is called in messages;
  // free(held): frees it (default: deletes an Embind object); group: a Set it is in while it
  // lives (livesOf), or null.
  constructor(owner, noun, held, free = deleteBinding, group = null) {
    this.noun = noun;
    this.held = held;
    this.withLibrary = false;   // whether its library's dispose() ended it
    this.free = free;
    this.group = group;
    group?.add(this);
    forgotten.register(owner, this, this);
  }

  // What it holds; throws an MHAError naming `what` once disposed.
  check(what) {
    if (this.held === null) {
      throw new MHAError(`${what}: expected a live ${this.noun}, received one that was disposed` +
                         (this.withLibrary ? ' with its library' : ''));
    }
    return this.held;
  }

  // dispose(): frees what it holds now (a second call does nothing); `withLibrary` when its
  // library's dispose() ends it.
  end(withLibrary = false) {
    if (this.held === null) return;
    this.withLibrary = withLibrary;
    forgotten.unregister(this);
    this.group?.delete(this);
    const held = this.held;
    this.held = null;
    this.free(held);
  }
}

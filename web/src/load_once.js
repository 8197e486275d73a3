// loadMHA() loads once per set of options: every call with the same options gets the same library
// (its Promise while it loads), so that a server calling it per request, or React StrictMode's
// second effect, shares one engine instead of starting another. A failed load is not kept; a
// disposed library is forgotten (lib.dispose() calls forget), and the next call loads afresh.
const loaded = new Map();   // key -> { promise, lib }

// resolved: what the options come to here ({ build, threads } from load.js's resolveLoad, proxy
// as a boolean, wasmPaths), so that {} and { threads: 'auto' } or { build: 'simd', threads: 1 } and
// { build: 'simd' } give one library where they load the same build with the same threads.
const keyOf = (r) => JSON.stringify([r.build, r.threads, r.proxy,
  r.wasmPaths === undefined ? null : String(r.wasmPaths)]);

export function loadOnce(resolved, load) {
  const key = keyOf(resolved);
  let entry = loaded.get(key);
  if (entry === undefined) {
    entry = { lib: null };
    entry.promise = load().then((lib) => {
      entry.lib = lib;
      return lib;
    }, (error) => {
      loaded.delete(key);
      throw error;
    });
    loaded.set(key, entry);
  }
  return entry.promise;
}

export function forget(lib) {
  for (const [key, entry] of loaded) {
    if (entry.lib === lib) loaded.delete(key);
  }
}

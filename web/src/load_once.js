// loadMHA() loads once per set of options: every call with the same options gets the same library
// (its Promise while it loads), so that a server calling it per request, or React StrictMode's
// second effect, shares one engine instead of starting another. A failed load is not kept; a
// disposed library is forgotten (lib.dispose() calls forget), and the next call loads afresh.
const loaded = new Map();   // key -> { promise, lib }

// The options as loadMHA compares them (checked by checkLoadOptions; undefined = the default).
const keyOf = (o) => JSON.stringify([o.threads ?? 'auto', o.build ?? null, o.proxy ?? 'auto',
  o.wasmPaths === undefined ? null : String(o.wasmPaths)]);

export function loadOnce(options, load) {
  const key = keyOf(options);
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

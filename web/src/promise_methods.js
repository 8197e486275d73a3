// The error rule of Promise-returning methods (docs/design.md, "Loading in real
// apps", as WebIDL's): such a method never throws; every error of it, bad
// arguments included, rejects the Promise it returns.

// Makes each of `methods` of `Class` (whose own code may throw, and returns a
// value or a Promise) return a Promise that its errors reject: the one place
// the rule is applied, for the in-thread classes and the proxy's clients.
export function returnPromises(Class, methods) {
  for (const method of methods) {
    const run = Class.prototype[method];
    Object.defineProperty(Class.prototype, method, {
      value(...args) {
        try {
          return Promise.resolve(run.apply(this, args));
        } catch (error) {
          return Promise.reject(error);
        }
      },
      writable: true, configurable: true,
    });
  }
}

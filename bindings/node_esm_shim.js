// Prepended (--extern-pre-js) to the ES module Emscripten 3.1.6 emits: under
// Node that output still calls CommonJS `require` and reads `__dirname`, which
// an ES module lacks. Module-scoped here, so nothing leaks into globals; the
// imports are dynamic and hidden from bundlers, so browsers never load them.
var require, __dirname;
if (typeof process == 'object' && process.versions && process.versions.node) {
  const nodeModule = 'node:module';
  const nodeUrl = 'node:url';
  require = (await import(/* webpackIgnore: true */ /* @vite-ignore */ nodeModule))
    .createRequire(import.meta.url);
  __dirname = require('node:path').dirname(
    (await import(/* webpackIgnore: true */ /* @vite-ignore */ nodeUrl)).fileURLToPath(import.meta.url));
}

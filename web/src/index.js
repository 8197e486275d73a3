// mha-wasm for Node (package.json "exports": "node"): multi-head attention
// with PyTorch nn.MultiheadAttention semantics in WebAssembly. Reads its
// files from the package, never fetches. See README.md and docs/design.md.
import * as env from './env_node.js';
import { MHAError } from './errors.js';
import { checkLoadOptions, loadInThread, resolveLoad } from './load.js';
import { loadOnce } from './load_once.js';
import { startProxy } from './proxy_client.js';

export { MHAError };

// options: { threads, build, proxy, wasmPaths } (see web/index.d.ts). Node
// runs the engine in the calling thread (proxy: 'auto' or false), or with
// proxy: true in a worker_threads worker of the package's own, as a page's
// proxy does, so that the event loop runs on during a call. It reads the
// package's own files (wasmPaths is for browsers and ignored here). Options
// that resolve alike give the same library (load_once.js).
export async function loadMHA(options) {
  const o = checkLoadOptions(options);
  const { build, threads } = resolveLoad(o, env);
  const proxy = o.proxy === true;
  return loadOnce({ build, threads, proxy }, () => (proxy ? startProxy(o, env.proxyFiles(), env)
    : loadInThread(o, env, env.fileUrls())));
}

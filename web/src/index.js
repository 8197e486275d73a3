// mha-wasm for Node (package.json "exports": "node"): multi-head attention
// with PyTorch nn.MultiheadAttention semantics in WebAssembly. Reads its
// files from the package, never fetches. See README.md and docs/design.md.
import * as env from './env_node.js';
import { MHAError } from './errors.js';
import { checkLoadOptions, loadInThread, resolveLoad } from './load.js';
import { loadOnce } from './load_once.js';

export { MHAError };

// options: { threads, build, proxy, wasmPaths } (see web/index.d.ts). Node
// runs the engine in the calling thread (proxy: 'auto' or false) and reads
// the package's own files (wasmPaths is for browsers and ignored here). The
// same resolved options give the same library (load_once.js).
export async function loadMHA(options) {
  const o = checkLoadOptions(options);
  if (o.proxy === true) {
    throw new MHAError("proxy: expected 'auto' or false in Node, which runs the engine in the " +
                       'calling thread (start a worker_threads Worker to move it off), received true');
  }
  const { build, threads } = resolveLoad(o, env);
  return loadOnce({ build, threads, proxy: false }, () => loadInThread(o, env, env.fileUrls()));
}

// mha-wasm for pages and Web Workers (package.json "exports": "browser" and
// "default"): no Node code. See README.md and docs/design.md ("Loading in real apps").
import * as env from './env_browser.js';
import { MHAError } from './errors.js';
import { checkLoadOptions, loadInThread, resolveLoad, warnIfThreadsOff } from './load.js';
import { loadOnce } from './load_once.js';
import { startProxy } from './proxy_client.js';

export { MHAError };

// 'auto': a Worker of the package's own on a page's main thread, the calling
// thread inside workers.
function useProxy(proxy) {
  const workersAvailable = typeof Worker === 'function';
  if (proxy === true && !workersAvailable) {
    throw new MHAError('proxy: expected an environment with Web Workers for true, received one ' +
                       'without them');
  }
  const onPageMainThread = typeof window === 'object' && typeof document === 'object';
  return proxy === true || (proxy !== false && onPageMainThread && workersAvailable);
}

// options: { threads, build, proxy, wasmPaths } (see web/index.d.ts). Options
// that resolve alike give the same library (load_once.js).
export async function loadMHA(options) {
  const o = checkLoadOptions(options);
  const { build, threads } = resolveLoad(o, env);
  const proxy = useProxy(o.proxy);
  return loadOnce({ build, threads, proxy, wasmPaths: o.wasmPaths }, async () => {
    const files = env.fileUrls(o.wasmPaths);
    const lib = proxy ? await startProxy(o, files, env) : await loadInThread(o, env, files);
    warnIfThreadsOff(lib.info, o);
    return lib;
  });
}

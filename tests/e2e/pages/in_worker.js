// loadMHA() inside a page's own Worker (tests/e2e/proxy.test.mjs): 'auto' runs the engine here.
import { loadMHA } from '/web/src/browser.js';

const lib = await loadMHA();
self.postMessage(lib.info);

// The same forwards inside a worker of the page's own (the engine in this thread, no proxy):
// each message times one and posts its ms.
import { loadMHA } from '/web/src/browser.js';
import { prepareForwards } from './common.js';

const lib = await loadMHA();
const timers = await prepareForwards(lib);
self.onmessage = async ({ data: size }) => self.postMessage(await timers[size]());
self.postMessage(lib.info);

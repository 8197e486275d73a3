// The same forwards inside a worker of the page's own (the engine in this thread, no proxy).
import { loadMHA } from '/web/src/browser.js';
import { timeForwards } from './common.js';

const lib = await loadMHA();
self.onmessage = async ({ data: { size, reps } }) => {
  self.postMessage({ info: lib.info, ms: await timeForwards(lib, size, reps) });
};
self.postMessage({ ready: true });

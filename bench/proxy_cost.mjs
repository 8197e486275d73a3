#!/usr/bin/env node
// The proxy's cost in Chromium (cross-origin isolated, threaded build): the median round trip of a
// forward awaited on the page's main thread through the proxy, against the same forward timed
// inside a worker of the page's own with the engine in that thread. Sizes in bench/proxy/common.js:
// tiny (L = 4, E = 64) and large (L = 1024, E = 512, no weights). Calls alternate between the two
// so that other load on the machine falls on both alike.
// Usage: node bench/proxy_cost.mjs [large pairs] (after npm run build).
import { cpus, loadavg } from 'node:os';
import { createStaticServer } from '../scripts/static_server.mjs';
import { ROOT, launchBrowser } from '../tests/e2e/harness.mjs';

const REPS = { tiny: 1000, large: Number(process.argv[2] ?? 40) };

const server = createStaticServer(ROOT, { servedDirs: ['web', 'dist', 'bench'] });
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const browser = await launchBrowser();
try {
  const page = await browser.context.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/bench/proxy/page.html`);
  await page.waitForFunction(() => document.title === 'ready', null, { timeout: 60_000 });
  const { proxy: info, worker: workerInfo } = await page.evaluate(() => window.infos);
  console.log(`Chromium; through the proxy ${info.build}, ${info.threads} threads; in a worker ` +
              `${workerInfo.build}, ${workerInfo.threads} threads; ${cpus()[0].model}`);
  for (const size of ['tiny', 'large']) {
    const { proxy, worker } = await page.evaluate(([s, r]) => window.measure(s, r), [size, REPS[size]]);
    console.log(`${size.padEnd(6)} ${REPS[size]} pairs: through the proxy ${proxy.toFixed(3)} ms, in a ` +
                `worker ${worker.toFixed(3)} ms: +${(proxy - worker).toFixed(3)} ms ` +
                `(${((proxy / worker - 1) * 100).toFixed(1)} %); load average ` +
                loadavg().map((l) => l.toFixed(2)).join(' '));
  }
} finally {
  await browser.close();
  server.close();
}

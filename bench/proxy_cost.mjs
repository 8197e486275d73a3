#!/usr/bin/env node
// The proxy's cost in Chromium (cross-origin isolated, threaded build): the median round trip of a
// forward awaited on the page's main thread through the proxy, against the same forward awaited
// inside a worker of the page's own with the engine in that thread. Sizes in bench/proxy/common.js:
// tiny (L = 4, E = 64) and large (L = 1024, E = 512, no weights). Modes alternate over rounds so
// that other load on the machine hits both alike.
// Usage: node bench/proxy_cost.mjs [rounds] (after npm run build).
import { cpus, loadavg } from 'node:os';
import { createStaticServer } from '../scripts/static_server.mjs';
import { ROOT, launchBrowser } from '../tests/e2e/harness.mjs';

const ROUNDS = Number(process.argv[2] ?? 5);
const REPS = { tiny: 400, large: 10 };

const server = createStaticServer(ROOT, { servedDirs: ['web', 'dist', 'bench'] });
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
const browser = await launchBrowser();
try {
  const page = await browser.context.newPage();
  await page.goto(`http://127.0.0.1:${server.address().port}/bench/proxy/page.html`);
  await page.waitForFunction(() => document.title === 'ready', null, { timeout: 60_000 });
  const medians = { tiny: { proxy: [], worker: [] }, large: { proxy: [], worker: [] } };
  let info;
  for (let round = 0; round < ROUNDS; round++) {
    for (const size of ['tiny', 'large']) {
      for (const mode of ['proxy', 'worker']) {
        const result = await page.evaluate(([m, s, r]) => window.measure(m, s, r), [mode, size, REPS[size]]);
        medians[size][mode].push(result.ms);
        info = result.info;
      }
    }
  }
  const median = (values) => [...values].sort((a, b) => a - b)[values.length >> 1];
  console.log(`Chromium, ${info.build}, ${info.threads} threads; ${cpus()[0].model}; ` +
              `load average ${loadavg().map((l) => l.toFixed(2)).join(' ')}; ${ROUNDS} rounds`);
  for (const size of ['tiny', 'large']) {
    const proxy = median(medians[size].proxy);
    const worker = median(medians[size].worker);
    console.log(`${size.padEnd(6)} through the proxy ${proxy.toFixed(3)} ms, in a worker ` +
                `${worker.toFixed(3)} ms: +${(proxy - worker).toFixed(3)} ms (${((proxy / worker - 1) * 100).toFixed(1)} %)`);
  }
} finally {
  await browser.close();
  server.close();
}

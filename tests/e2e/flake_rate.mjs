#!/usr/bin/env node
// How often the harness itself fails in a browser: N times a fresh browser launched, a page whose
// worker starts 8 nested workers (no package code), then the proxy's test page and 50 rounds of
// proxy calls; each step must finish in time. Prints the failures and their step.
//   node tests/e2e/flake_rate.mjs [browser=firefox] [N=20]
import { BROWSERS, launch } from './driver/browsers.mjs';
import { startServer } from './harness.mjs';

const [name = 'firefox', runs = '20'] = process.argv.slice(2);
if (!BROWSERS[name]) throw new Error(`unknown browser ${name}`);
const failures = [];
const started = Date.now();
for (let i = 0; i < Number(runs); i++) {
  let step = 'launch';
  let browser;
  let server;
  try {
    browser = await launch(name);
    server = await startServer(browser, { tests: true });
    step = 'nested workers';
    await browser.page.goto(`${server.origin}/tests/e2e/pages/nested_workers.html`);
    await browser.page.waitForFunction(() => document.title === '8 workers', null, { timeout: 20_000 });
    step = 'proxy page';
    await browser.page.goto(`${server.origin}/tests/e2e/pages/proxy.html`);
    await browser.page.waitForFunction(() => document.title === 'ready', null, { timeout: 30_000 });
    step = 'proxy calls';
    const { stalled } = await browser.page.evaluate(() => window.proxyTest.stress(50, 10_000), null, { timeout: 60_000 });
    if (stalled) throw new Error(stalled);
  } catch (error) {
    failures.push({ run: i, step, message: error.message.split('\n')[0] });
    console.log(`run ${i}: failed at ${step}: ${error.message.split('\n')[0]}`);
  } finally {
    server?.stop();
    await browser?.close();
  }
}
const seconds = ((Date.now() - started) / 1000).toFixed(0);
console.log(`${name}: ${failures.length} of ${runs} runs failed (${seconds} s)`);
for (const step of new Set(failures.map((f) => f.step))) {
  console.log(`  at ${step}: ${failures.filter((f) => f.step === step).length}`);
}

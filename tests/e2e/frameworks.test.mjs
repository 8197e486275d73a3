// The package in the frameworks people build with (docs/frameworks.md): the `npm pack` tarball in
// a Next.js app (app router; `next build` with Turbopack and with `--webpack`, `next start`) and a
// SvelteKit app (adapter-node), with no configuration but the isolation headers. Each app runs
// tests/e2e/frameworks/check.js (loadMHA, one forward) in a client page, served to each browser
// cross-origin isolated and not, and on its server (a route handler; a page prerendered at build
// time or rendered per request), and must report the build and threads expected there and the
// forward's values as the package computes them in this process.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadMHA } from '../../web/src/index.js';
import { assertClose } from '../js/helpers/fixtures.js';
import { processStatus } from '../js/helpers/process_status.js';
import { APPS, prepareApp, serveWithAgent } from './framework_apps.mjs';
import { check } from './frameworks/check.js';
import { ROOT, expectedBuild, forEachBrowser } from './harness.mjs';

const TIMEOUT_MS = 60_000;
const servers = {};
let reference;

// The check's result as a page shows it (<pre id="result">, HTML-escaped).
function resultInHtml(html) {
  const text = html.match(/<pre id="result">([^<]*)<\/pre>/)?.[1];
  assert.ok(text, `no result in the page:\n${html.slice(0, 2000)}`);
  return JSON.parse(text.replaceAll('&quot;', '"').replaceAll('&amp;', '&'));
}

function assertReference(result, where) {
  assert.equal(result.error, undefined, `${where}: ${result.error}`);
  assert.equal(result.loadedOnce, true, `${where}: two loadMHA() calls gave two libraries`);
  assertClose({ data: result.output, shape: [result.output.length] },
    { data: reference, shape: [reference.length] }, where);
}

before(async () => {
  reference = (await check(loadMHA)).output;
  const dir = join(ROOT, 'build/frameworks');
  mkdirSync(dir, { recursive: true });
  const tarball = join(dir, execFileSync('npm', ['pack', '--silent', '--pack-destination', dir],
    { cwd: ROOT, encoding: 'utf8' }).trim().split('\n').pop());
  for (const [name, spec] of Object.entries(APPS)) {
    const app = prepareApp(spec.source, spec.dir, tarball);
    const start = performance.now();
    try {
      spec.build(app);
    } catch (error) {
      throw new Error(`${name}: the build failed:\n${error.stdout}\n${error.stderr}`);
    }
    const built = performance.now();
    servers[name] = await spec.start(app);
    console.log(`${name}: built in ${((built - start) / 1000).toFixed(1)} s, started in ` +
                `${((performance.now() - built) / 1000).toFixed(1)} s`);
  }
});

after(() => {
  for (const server of Object.values(servers)) server.stop();
});

// The server side, once per app: Node's threaded build, the thread count of loadMHA()'s default.
describe('servers', () => {
  const serverPages = {
    'Next.js, Turbopack': ['api/forward', 'prerendered'],
    'Next.js, webpack': ['api/forward', 'prerendered'],
    'SvelteKit, adapter-node': ['api/forward', 'server'],
  };
  for (const [name, paths] of Object.entries(serverPages)) {
    for (const path of paths) {
      test(`${name}: /${path}`, async () => {
        const response = await fetch(new URL(path, servers[name].url));
        const body = await response.text();
        assert.equal(response.status, 200, `${response.status}: ${body.slice(0, 2000)}\n${servers[name].output()}`);
        const result = path.startsWith('api/') ? JSON.parse(body) : resultInHtml(body);
        const local = (await loadMHA()).info;
        assert.equal(result.proxy, false);
        assert.equal(result.build, local.build);
        assert.equal(result.threads, local.threads);
        assertReference(result, `${name} /${path}`);
      });
    }
    // The server's OS threads and memory over 20 requests that each call loadMHA().
    test(`${name}: 20 requests share one engine`, async (t) => {
      const status = () => processStatus(servers[name].pid);
      const url = new URL('api/forward', servers[name].url);
      await (await fetch(url)).text();
      const first = status();
      for (let i = 0; i < 20; ++i) assert.equal((await fetch(url)).status, 200);
      const last = status();
      t.diagnostic(`${name}: threads ${first.threads} -> ${last.threads}, RSS ${first.rssMB.toFixed(0)} -> ${last.rssMB.toFixed(0)} MB`);
      assert.ok(last.threads <= first.threads + 2, `threads ${first.threads} -> ${last.threads}`);
      assert.ok(last.rssMB - first.rssMB < 100, `RSS ${first.rssMB.toFixed(0)} -> ${last.rssMB.toFixed(0)} MB`);
    });
  }
});

// The client side in each browser, isolated and not.
forEachBrowser((ctx) => {
  for (const name of Object.keys(APPS)) {
    describe(name, () => {
      for (const isolated of [true, false]) {
        test(isolated ? 'cross-origin isolated' : 'not isolated', async (t) => {
          const { browser, page } = ctx;
          const proxy = await serveWithAgent(servers[name].url, isolated, browser.control.agentTag);
          const since = page.messageCount;
          try {
            await page.goto(proxy.url);
            await page.waitForFunction(() => document.getElementById('result')?.textContent, null,
              { timeout: TIMEOUT_MS });
            const result = JSON.parse(await page.evaluate(() => document.getElementById('result').textContent));
            assertReference(result, `${browser.label}, ${name}`);
            const expected = expectedBuild(ctx.spec, isolated);
            assert.equal(result.proxy, true);
            assert.equal(result.build, expected.build);
            const cores = await page.evaluate(() => navigator.hardwareConcurrency);
            assert.equal(result.threads, expected.threadsOffReason ? 1 : Math.min(cores, 4));
            t.diagnostic(`${browser.label}, ${name}, ${isolated ? 'isolated' : 'not isolated'}: ` +
                         `${result.build}, ${result.threads} threads`);
            assert.deepEqual(page.errors(since), []);
          } finally {
            proxy.close();
          }
        });
      }
    });
  }
});

// The package on a page served with a strict Content-Security-Policy, in each browser, cross-origin
// isolated and not: WebAssembly allowed ('wasm-unsafe-eval'), string evaluation not (Embind built
// without it), workers from the page's origin and blob: (the proxy's from the package's file; the
// threads' still from Blob URLs that import the package's worker script: issue 32). The page (pages/csp.js) loads the package in its thread
// and through the proxy, runs a causal forward and decodes the same tokens through a KV cache;
// it must report no securitypolicyviolation.
import assert from 'node:assert/strict';
import { describe } from 'node:test';
import { expectedBuild, useTestPage } from './harness.mjs';

const POLICY = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self' blob:";
// The page the test agent runs in, served without the policy; the package page is its frame.
const FRAME = '/tests/e2e/pages/csp_frame.html';
const RUN_TIMEOUT_MS = 60_000;

const packagePage = () => document.querySelector('iframe').contentWindow.cspTest;
const ready = (page) => page.waitForFunction(packagePage, null, { timeout: RUN_TIMEOUT_MS });

for (const isolated of [true, false]) {
  describe(isolated ? 'cross-origin isolated' : 'not isolated', () => {
    useTestPage(FRAME, { isolated, tests: true, csp: { policy: POLICY, exempt: [FRAME] }, ready }, (ctx) => {
      ctx.test('in the thread and through the proxy: loads, forwards and decodes with no violation', async () => {
        const result = await ctx.page.evaluate(() => document.querySelector('iframe').contentWindow.cspTest.result);
        assert.equal(result.error, undefined);
        assert.deepEqual(await ctx.page.evaluate(() => document.querySelector('iframe').contentWindow.cspTest.violations), []);
        const { build } = expectedBuild(ctx.spec, isolated);
        assert.deepEqual(result.runs.map((run) => [run.proxy, run.info.proxy, run.info.build]),
          [[false, false, build], [true, true, build]]);
        for (const run of result.runs) {
          assert.ok(run.outputFinite, `proxy ${run.proxy}: the forward's output is finite`);
          assert.ok(run.decodeError < 1e-4, `proxy ${run.proxy}: decoding differs from the forward by ${run.decodeError}`);
        }
        assert.deepEqual(ctx.page.errors(), []);
      });
    });
  });
}

// The package on pages served with a strict Content-Security-Policy, in each browser, cross-origin
// isolated and not: WebAssembly allowed ('wasm-unsafe-eval'), string evaluation not (Embind is
// built without it), workers from the page's origin only (the proxy's and the threads' start from
// the package's files) or from blob: too. The package page (pages/csp.js) loads the package in its
// thread and through the proxy, runs a causal forward and decodes the same tokens through a KV
// cache; the demo runs its first forward. No violation may be reported: neither heard by the page
// (securitypolicyviolation) nor sent by the browser (report-uri, which workers' violations reach).
// Also: Trusted Types enforced, the package's URLs made root-relative as Next.js's
// bundlers leave them, and worker scripts served without the isolation headers on an isolated site
// (as SvelteKit's adapter-node serves them): the threads start from Blob URLs where the policy
// allows blob:, each revoked once its worker has started, else the load fails with an error that
// names the header and the file.
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ROOT, expectedBuild, forEachBrowser, startServer } from './harness.mjs';

const STRICT = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'";
const WITH_BLOB = `${STRICT} blob:`;
const TRUSTED_TYPES = `${STRICT}; require-trusted-types-for 'script'; trusted-types mha-wasm`;
// The page the test agent runs in, served without the policy; the page under test is its frame.
const FRAME = '/tests/e2e/pages/csp_frame.html';
const WORKER_SCRIPTS = ['/dist/mha-proxy-worker.mjs', '/dist/mha-simd-threaded.worker.js',
  '/dist/mha-relaxed-simd-threaded.worker.js'];
const RUN_TIMEOUT_MS = 120_000;
const REPORT_WAIT_MS = 1000;

// A copy of the repository's web/ whose package URLs are root-relative ('/dist/mha-simd.mjs'), as
// Next.js's webpack and Turbopack (url: 'relative') make `new URL('../../dist/…', import.meta.url)`.
let relativeRoot;
before(() => {
  relativeRoot = mkdtempSync(join(tmpdir(), 'mha-relative-urls-'));
  cpSync(join(ROOT, 'web'), join(relativeRoot, 'web'), { recursive: true });
  for (const dir of ['dist', 'tests']) symlinkSync(join(ROOT, dir), join(relativeRoot, dir));
  const env = join(relativeRoot, 'web/src/env_browser.js');
  let replaced = 0;
  writeFileSync(env, readFileSync(env, 'utf8').replace(/new URL\('\.\.\/\.\.(\/dist\/[^']+)', import\.meta\.url\)\.href/g,
    (_, path) => { replaced++; return `'${path}'`; }));
  assert.equal(replaced, 9, "env_browser.js's package URLs");
});
after(() => relativeRoot && rmSync(relativeRoot, { recursive: true, force: true }));

// The framed page `page` served with `policy` (and startServer's `options`): its result (when it
// sets window.cspTest) or the demo's, its violations heard and the violation reports sent.
async function runFramed(ctx, { policy, page = './csp.html', ...options }) {
  const reports = [];
  const server = await startServer(ctx.browser, { tests: true, csp: { policy, exempt: [FRAME], reports }, ...options });
  try {
    await ctx.page.goto(`${server.origin}${FRAME}?page=${encodeURIComponent(page)}`);
    await ctx.page.waitForFunction(() => {
      const frame = document.querySelector('iframe').contentWindow;
      return frame.cspTest || ['done', 'error'].includes(frame.document.getElementById('result')?.dataset.state);
    }, null, { timeout: RUN_TIMEOUT_MS });
    const framed = await ctx.page.evaluate(async () => {
      const frame = document.querySelector('iframe').contentWindow;
      if (!frame.cspTest) return { demo: { ...frame.document.getElementById('result').dataset }, violations: [] };
      return { ...(await frame.cspTest.result), violations: frame.cspTest.violations };
    }, null, { timeout: RUN_TIMEOUT_MS });
    await new Promise((resolve) => setTimeout(resolve, REPORT_WAIT_MS));
    return { ...framed, reports: reports.map((r) => `${r['violated-directive']}: ${r['blocked-uri']} (${r['source-file']})`) };
  } finally {
    server.stop();
  }
}

// The package page's two runs, in the thread and through the proxy, all well with `build`.
function assertRuns(result, build) {
  assert.deepEqual(result.runs.map((run) => [run.proxy, run.error, run.info?.proxy, run.info?.build]),
    [[false, undefined, false, build], [true, undefined, true, build]]);
  for (const run of result.runs) {
    assert.ok(run.outputFinite, `proxy ${run.proxy}: the forward's output is finite`);
    assert.ok(run.decodeError < 1e-4, `proxy ${run.proxy}: decoding differs from the forward by ${run.decodeError}`);
  }
}

function assertNoViolation(ctx, result, since) {
  assert.deepEqual(result.violations, []);
  assert.deepEqual(result.reports, []);
  assert.deepEqual(ctx.page.errors(since), []);
}

forEachBrowser((ctx) => {
  // A test that the package page, served as options() says, loads, forwards and decodes in the
  // thread and through the proxy, with no violation.
  // No Blob URL the page made outlives its worker; `blobs`: whether the workers start from them.
  const works = (name, options, blobs = false) => test(`${name}: loads, forwards and decodes in the thread and through the proxy`, async () => {
    const since = ctx.page.messageCount;
    const result = await runFramed(ctx, options());
    assertRuns(result, expectedBuild(ctx.spec, options().isolated).build);
    assertNoViolation(ctx, result, since);
    assert.equal(result.blobUrls.live, 0, 'Blob URLs not revoked');
    assert.equal(result.blobUrls.made > 0, blobs, `${result.blobUrls.made} Blob URLs made`);
  });

  for (const isolated of [true, false]) {
    const where = isolated ? 'cross-origin isolated' : 'not isolated';
    for (const policy of [STRICT, WITH_BLOB]) works(`${where}, ${policy.split('; ').pop()}`, () => ({ policy, isolated }));

    test(`${where}, ${STRICT.split('; ').pop()}: the demo runs`, async () => {
      const since = ctx.page.messageCount;
      const result = await runFramed(ctx, { policy: STRICT, isolated, page: '/web/demo/' });
      assert.equal(result.demo.state, 'done', result.demo.error);
      assertNoViolation(ctx, result, since);
    });
  }

  works("the package's URLs made root-relative, as Next.js's bundlers leave them",
    () => ({ policy: STRICT, isolated: true, root: relativeRoot }));
  works("Trusted Types required: the workers' URLs come from the policy 'mha-wasm'",
    () => ({ policy: TRUSTED_TYPES, isolated: true }));
  works('worker scripts served without COEP on an isolated site: they start from Blob URLs where blob: is allowed',
    () => ({ policy: WITH_BLOB, isolated: true, withoutIsolation: WORKER_SCRIPTS }), true);

  test("Trusted Types that do not allow the policy 'mha-wasm': the error says to add it", async () => {
    const result = await runFramed(ctx, { policy: TRUSTED_TYPES.replace(/mha-wasm$/, 'other'), isolated: true });
    // In the page's thread the single-thread build starts no worker, and so needs no policy.
    const workers = expectedBuild(ctx.spec, true).build === 'simd' ? result.runs.slice(1) : result.runs;
    for (const run of workers) assert.match(run.error, /MHAError: .*add mha-wasm to its trusted-types directive/);
  });

  test('worker scripts served without COEP, blob: not allowed: the error names the header and the file', async () => {
    const result = await runFramed(ctx, { policy: STRICT, isolated: true, withoutIsolation: WORKER_SCRIPTS });
    const { build } = expectedBuild(ctx.spec, true);
    const proxyRun = result.runs[1];
    assert.match(proxyRun.error, /MHAError: mha-wasm: the engine's worker did not start: its script \S+\/dist\/mha-proxy-worker\.mjs .*Cross-Origin-Embedder-Policy: require-corp.*worker-src blob:/);
    if (build !== 'simd') {
      assert.match(result.runs[0].error, new RegExp(`thread workers did not start: its script \\S+/dist/mha-${build}\\.worker\\.js .*Cross-Origin-Embedder-Policy`));
    }
  });
});

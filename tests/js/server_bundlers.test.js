// A server bundler that moves the package's JavaScript away from its dist/ folder (SvelteKit's
// adapter-node bundling a devDependency, Next.js's output: 'standalone' without the files) gets
// an error that names the setting that keeps the files (docs/frameworks.md).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { MHAError } from '../../web/src/index.js';
import { instantiate } from '../../web/src/env_node.js';

test("files missing where the package expects them: an MHAError naming the frameworks' settings", async () => {
  const missing = new URL('../../build/no-such-dir/', import.meta.url);
  const files = { js: new URL('mha-simd.mjs', missing), wasm: new URL('mha-simd.wasm', missing) };
  await assert.rejects(instantiate(files, {}), (e) => e instanceof MHAError &&
    /the engine's files are not where the package expects them \(.*no-such-dir.mha-simd\.wasm\)/.test(e.message) &&
    /dependencies \(not devDependencies\)/.test(e.message) && /serverExternalPackages/.test(e.message) &&
    /outputFileTracingIncludes/.test(e.message));
});

// Builds tests/e2e/app (installed with the package's tarball in `dir`) with each bundler, the way
// the README tells users to, and serves the result on 127.0.0.1, cross-origin isolated or not.
// Each entry: { build(dir) -> out folder | undefined, serve(dir, out, isolated, inject) -> { url, close } },
// `inject` HTML put at the start of the app's pages (the browser tests' agent).
// The bundlers are the repository's pinned devDependencies.
import { cpSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { nodeResolve } from '@rollup/plugin-node-resolve';
import * as esbuild from 'esbuild';
import { rollup } from 'rollup';
import * as vite from 'vite';
import webpack from 'webpack';
import { ISOLATION_HEADERS, createStaticServer, injectInto } from '../../scripts/static_server.mjs';

async function serveFolder(out, isolated, options = {}) {
  const server = createStaticServer(out, { isolated, ...options });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${server.address().port}/`, close: () => server.close() };
}

// For tools that copy no assets: the package's dist/ (browser files) copied to out/mha-wasm/,
// and a page that names where it is served (loadMHA's wasmPaths).
function pageWithWasmPaths(app, out, wasmPaths = './mha-wasm/') {
  const dist = join(app, 'node_modules/mha-wasm/dist');
  mkdirSync(join(out, 'mha-wasm'), { recursive: true });
  for (const name of readdirSync(dist)) {
    if (name !== 'node') cpSync(join(dist, name), join(out, 'mha-wasm', name));
  }
  writeFileSync(join(out, 'index.html'), '<!doctype html><meta charset="utf-8">\n' +
    `<script>window.mhaOptions = { wasmPaths: ${JSON.stringify(wasmPaths)} };</script>\n` +
    '<script type="module" src="./main.js"></script>\n');
}

async function buildWithEsbuild(app, out) {
  await esbuild.build({
    entryPoints: [join(app, 'main.js')], bundle: true, format: 'esm', outdir: out, logLevel: 'error',
  });
}

const viteQuiet = (app) => ({ root: app, logLevel: 'error', cacheDir: join(app, '.vite-cache') });

export const BUNDLERS = {
  'Vite build': {
    async build(app) {
      const out = join(app, 'out-vite');
      await vite.build({ ...viteQuiet(app), build: { outDir: out, emptyOutDir: true } });
      return out;
    },
    serve: (app, out, isolated, inject) => serveFolder(out, isolated, { inject }),
  },
  'Vite dev server': {
    build: async () => undefined,
    async serve(app, out, isolated, inject) {
      const server = await vite.createServer({
        ...viteQuiet(app),
        plugins: [{ name: 'inject', transformIndexHtml: (html) => injectInto(html, inject ?? '') }],
        server: { host: '127.0.0.1', port: 0, headers: isolated ? ISOLATION_HEADERS : {} },
      });
      await server.listen();
      return { url: server.resolvedUrls.local[0], close: () => server.close() };
    },
  },
  'webpack 5': {
    async build(app) {
      const out = join(app, 'out-webpack');
      const compiler = webpack({ mode: 'production', entry: join(app, 'main.js'), output: { path: out } });
      const stats = await new Promise((resolve, reject) => {
        compiler.run((error, result) => (error ? reject(error) : resolve(result)));
      });
      await new Promise((resolve) => compiler.close(resolve));
      if (stats.hasErrors()) throw new Error(stats.toString({ all: false, errors: true }));
      writeFileSync(join(out, 'index.html'), '<!doctype html><meta charset="utf-8"><script src="main.js"></script>\n');
      return out;
    },
    serve: (app, out, isolated, inject) => serveFolder(out, isolated, { inject }),
  },
  'Rollup 4': {
    async build(app) {
      const out = join(app, 'out-rollup');
      const bundle = await rollup({ input: join(app, 'main.js'), plugins: [nodeResolve({ browser: true })] });
      await bundle.write({ dir: out, format: 'es' });
      await bundle.close();
      pageWithWasmPaths(app, out);
      return out;
    },
    serve: (app, out, isolated, inject) => serveFolder(out, isolated, { inject }),
  },
  esbuild: {
    async build(app) {
      const out = join(app, 'out-esbuild');
      await buildWithEsbuild(app, out);
      pageWithWasmPaths(app, out);
      return out;
    },
    serve: (app, out, isolated, inject) => serveFolder(out, isolated, { inject }),
  },
  // The files on another origin, as from a CDN: the page's wasmPaths names it.
  'esbuild, dist/ from a CDN': {
    async build(app) {
      const out = join(app, 'out-esbuild-cdn');
      await buildWithEsbuild(app, out);
      return out;
    },
    async serve(app, out, isolated, inject) {
      const cdn = await serveFolder(join(out, 'mha-wasm'), false, { cdn: true });
      pageWithWasmPaths(app, out, cdn.url);
      const page = await serveFolder(out, isolated, { inject });
      return { url: page.url, close: () => { page.close(); cdn.close(); } };
    },
  },
};


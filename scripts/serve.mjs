#!/usr/bin/env node
// Static server for the demo page: serves web/ and dist/ from the repository root on 127.0.0.1.
// By default it sends COOP/COEP so the page is cross-origin isolated and may use threads
// (SharedArrayBuffer); --no-isolation leaves them out, which makes the page fall back to the
// single-thread build.
//
// Usage: node scripts/serve.mjs [--port N] [--no-isolation]
// Env:   PORT (default 8080; 0 picks a free port), MHA_NO_ISOLATION=1.
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createStaticServer } from './static_server.mjs';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const START_PAGE = '/web/demo/';

const { values: options } = parseArgs({
  options: {
    port: { type: 'string', default: process.env.PORT ?? '8080' },
    'no-isolation': { type: 'boolean', default: process.env.MHA_NO_ISOLATION === '1' },
  },
});
const port = Number(options.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`serve: --port must be an integer in 0..65535, got "${options.port}"`);
  process.exit(2);
}
const isolated = !options['no-isolation'];

// Only these top-level folders are reachable: the page, the package and the built WASM.
const server = createStaticServer(ROOT, { isolated, servedDirs: ['web', 'dist'], startPage: START_PAGE });

server.on('error', (error) => {
  const hint = error.code === 'EADDRINUSE' ? ` (port ${port} is taken: pass --port N or set PORT)` : '';
  console.error(`serve: ${error.message}${hint}`);
  process.exit(1);
});

server.listen(port, '127.0.0.1', () => {
  const { port: actualPort } = server.address();
  const mode = isolated ? 'cross-origin isolated (COOP/COEP on)' : 'NOT isolated (COOP/COEP off)';
  console.log(`mha-wasm demo: http://127.0.0.1:${actualPort}${START_PAGE}  [${mode}]`);
});

#!/usr/bin/env node
// Static server for the demo page: serves web/ and dist/ from the repository root on 127.0.0.1.
// By default it sends COOP/COEP so the page is cross-origin isolated and may use threads
// (SharedArrayBuffer); --no-isolation leaves them out, which makes the page fall back to the
// single-thread build.
//
// Usage: node scripts/serve.mjs [--port N] [--no-isolation]
// Env:   PORT (default 8080; 0 picks a free port), MHA_NO_ISOLATION=1.
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
// Only these top-level folders are reachable: the page, the package and the built WASM.
const SERVED_DIRS = ['web', 'dist'];
const START_PAGE = '/web/demo/';

const MIME_TYPES = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.wasm': 'application/wasm',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.map': 'application/json; charset=utf-8',
  '.ts': 'text/plain; charset=utf-8',
  '.safetensors': 'application/octet-stream',
};

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

function headersFor(path) {
  const headers = {
    'Content-Type': MIME_TYPES[extname(path)] ?? 'application/octet-stream',
    'Cache-Control': 'no-store',
  };
  if (isolated) {
    headers['Cross-Origin-Opener-Policy'] = 'same-origin';
    headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
  }
  return headers;
}

// Maps a URL path to a file under one of SERVED_DIRS, or null when it points elsewhere.
function resolvePath(urlPath) {
  const relative = normalize(decodeURIComponent(urlPath)).replace(/^[/\\]+/, '');
  const top = relative.split(sep)[0];
  if (!SERVED_DIRS.includes(top)) return null;
  return join(ROOT, relative);
}

async function handle(request, response) {
  const url = new URL(request.url, 'http://localhost');
  if (url.pathname === '/') {
    response.writeHead(302, { Location: START_PAGE });
    response.end();
    return;
  }
  let path = resolvePath(url.pathname);
  let info = path && (await stat(path).catch(() => null));
  if (info?.isDirectory()) {
    if (!url.pathname.endsWith('/')) {
      response.writeHead(301, { Location: `${url.pathname}/` });
      response.end();
      return;
    }
    path = join(path, 'index.html');
    info = await stat(path).catch(() => null);
  }
  if (!info?.isFile()) {
    response.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' });
    response.end(`not found: ${url.pathname}\n`);
    return;
  }
  response.writeHead(200, { ...headersFor(path), 'Content-Length': info.size });
  if (request.method === 'HEAD') {
    response.end();
    return;
  }
  createReadStream(path).pipe(response);
}

const server = createServer((request, response) => {
  handle(request, response).catch((error) => {
    response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
    response.end(`server error: ${error.message}\n`);
  });
});

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

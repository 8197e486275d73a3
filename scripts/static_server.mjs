// A static file server for a folder on 127.0.0.1, optionally cross-origin isolated (COOP/COEP
// headers, which pages need for SharedArrayBuffer and so for threads). Used by `npm start`
// (scripts/serve.mjs) and by the browser tests that serve built apps.
import { createServer } from 'node:http';
import { createReadStream } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';

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

export const ISOLATION_HEADERS = {
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
};

// What a CDN sends so that pages of other origins, isolated ones included, may load its files.
const CDN_HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Cross-Origin-Resource-Policy': 'cross-origin',
};

const REPORT_PATH = '/csp-report';

// `extra` after the page's doctype (before it, the page would render in quirks mode).
export function injectInto(html, extra) {
  const doctype = html.match(/^\s*<!doctype[^>]*>/i);
  const at = doctype ? doctype[0].length : 0;
  return html.slice(0, at) + extra + html.slice(at);
}

// root: the folder served; servedDirs: when given, only these top-level folders are reachable;
// startPage: where / redirects to (default: /index.html is served); cdn: send CDN_HEADERS;
// inject: HTML put at the start of every .html page, after its doctype (the browser tests' agent);
// csp: { policy, exempt, reports? }: every response but those of the URL paths in `exempt`
// carries `Content-Security-Policy: policy` (scripts and workers too, as a site-wide header does),
// and `inject` goes only into the exempt pages (a policy page would refuse the agent); with
// `reports` (an array), the policy asks for violation reports (`report-uri`, workers' too, which
// a page's securitypolicyviolation listener does not hear), and each is pushed there.
// withoutIsolation: URL paths served without the isolation headers on an isolated site (as
// SvelteKit's adapter-node serves its static files).
export function createStaticServer(root, {
  isolated = true, servedDirs = null, startPage = null, cdn = false, inject = null, csp = null,
  withoutIsolation = [],
} = {}) {
  const underPolicy = (urlPath) => csp !== null && !csp.exempt.includes(urlPath);
  const policy = csp?.reports ? `${csp.policy}; report-uri ${REPORT_PATH}` : csp?.policy;
  function headersFor(path, urlPath) {
    return {
      'Content-Type': MIME_TYPES[extname(path)] ?? 'application/octet-stream',
      'Cache-Control': 'no-store',
      ...(isolated && !withoutIsolation.includes(urlPath) ? ISOLATION_HEADERS : {}),
      ...(cdn ? CDN_HEADERS : {}),
      ...(underPolicy(urlPath) ? { 'Content-Security-Policy': policy } : {}),
    };
  }

  async function receiveReport(request, response) {
    let body = '';
    for await (const chunk of request) body += chunk;
    csp.reports.push(JSON.parse(body)['csp-report'] ?? body);
    response.writeHead(204);
    response.end();
  }

  // Maps a URL path to a file under root, or null when it points elsewhere.
  function resolvePath(urlPath) {
    const relative = normalize(decodeURIComponent(urlPath)).replace(/^[/\\]+/, '');
    if (relative.startsWith('..')) return null;
    if (servedDirs && !servedDirs.includes(relative.split(sep)[0])) return null;
    return join(root, relative);
  }

  async function handle(request, response) {
    const url = new URL(request.url, 'http://localhost');
    if (csp?.reports && url.pathname === REPORT_PATH && request.method === 'POST') {
      await receiveReport(request, response);
      return;
    }
    if (url.pathname === '/' && startPage) {
      response.writeHead(302, { Location: startPage });
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
    if (inject && extname(path) === '.html' && !underPolicy(url.pathname)) {
      const html = injectInto(await readFile(path, 'utf8'), inject);
      response.writeHead(200, { ...headersFor(path, url.pathname), 'Content-Length': Buffer.byteLength(html) });
      response.end(request.method === 'HEAD' ? undefined : html);
      return;
    }
    response.writeHead(200, { ...headersFor(path, url.pathname), 'Content-Length': info.size });
    if (request.method === 'HEAD') {
      response.end();
      return;
    }
    createReadStream(path).pipe(response);
  }

  return createServer((request, response) => {
    handle(request, response).catch((error) => {
      response.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' });
      response.end(`server error: ${error.message}\n`);
    });
  });
}

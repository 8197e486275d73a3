// Builds the framework apps of tests/e2e/frameworks/ (Next.js with Turbopack and with webpack,
// SvelteKit with adapter-node) in build/frameworks/, with the package's `npm pack` tarball
// unpacked as their node_modules/mha-wasm (the frameworks themselves are the repository's pinned
// devDependencies, found from build/ by Node's resolution), and runs their production servers.
// Each entry: { source, check (where the shared check.js goes), build(app), start(app) -> url }.
// serveWithAgent puts the browser tests' agent into their pages and, for `isolated`, the cookie
// their configuration answers with the isolation headers.
import { execFileSync, spawn } from 'node:child_process';
import { cpSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request } from 'node:http';
import { join } from 'node:path';
import { injectInto } from '../../scripts/static_server.mjs';
import { ROOT } from './harness.mjs';

const SOURCES = join(ROOT, 'tests/e2e/frameworks');
const NEXT = join(ROOT, 'node_modules/next/dist/bin/next');
const VITE = join(ROOT, 'node_modules/vite/bin/vite.js');
// No calls home from a test machine.
const QUIET_ENV = { ...process.env, NEXT_TELEMETRY_DISABLED: '1' };

// A copy of app `name` in build/frameworks/<dir>, the package unpacked into it from `tarball`.
export function prepareApp(name, dir, tarball) {
  const app = join(ROOT, 'build/frameworks', dir);
  rmSync(app, { recursive: true, force: true });
  cpSync(join(SOURCES, name), app, { recursive: true });
  cpSync(join(SOURCES, 'check.js'), join(app, FRAMEWORKS[name].check));
  // As `npm install <tarball>` writes it (adapter-node leaves `dependencies` to Node).
  writeFileSync(join(app, 'package.json'), JSON.stringify({
    name: `app-${dir}`, private: true, type: 'module', dependencies: { 'mha-wasm': `file:${tarball}` },
  }));
  const installed = join(app, 'node_modules/mha-wasm');
  mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1']);
  return app;
}

// Starts `args` in `app` and resolves with its URL once it listens on `port`; rejects with its
// output when it exits first or has not answered in STARTUP_MS (and then stops polling, which
// would keep this process alive).
const STARTUP_MS = 120_000;
function startServer(app, command, args, port, env = {}) {
  const child = spawn(process.execPath, [command, ...args], {
    cwd: app, env: { ...QUIET_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = `http://127.0.0.1:${port}/`;
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (fn, value) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      fn(value);
    };
    const fail = (message) => {
      child.kill();
      settle(reject, new Error(`${command} ${message}:\n${output}`));
    };
    const timer = setTimeout(() => fail(`did not answer at ${url} in ${STARTUP_MS / 1000} s`), STARTUP_MS);
    const onData = (data) => { output += data; };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => { if (!settled) fail(`exited (${code})`); });
    const poll = async () => {
      try {
        await fetch(url);
        settle(resolve, { url, pid: child.pid, output: () => output, stop: () => child.kill() });
      } catch {
        if (!settled) setTimeout(poll, 200);
      }
    };
    poll();
  });
}

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const nextApp = (builder) => ({
  source: 'next',
  build: (app) => execFileSync(process.execPath, [NEXT, 'build', ...builder], { cwd: app, env: QUIET_ENV, stdio: 'pipe' }),
  start: async (app) => {
    const port = await freePort();
    return startServer(app, NEXT, ['start', '-H', '127.0.0.1', '-p', String(port)], port);
  },
});

export const FRAMEWORKS = {
  next: { check: 'app/check.js' },
  sveltekit: { check: 'src/lib/check.js' },
};

// The apps as built and served: which source, how to build it, how to start its server.
export const APPS = {
  'Next.js, Turbopack': { dir: 'next-turbopack', ...nextApp([]) },
  'Next.js, webpack': { dir: 'next-webpack', ...nextApp(['--webpack']) },
  'SvelteKit, adapter-node': {
    dir: 'sveltekit',
    source: 'sveltekit',
    build: (app) => execFileSync(process.execPath, [VITE, 'build', '--logLevel', 'error'], { cwd: app, env: QUIET_ENV, stdio: 'pipe' }),
    start: async (app) => {
      const port = await freePort();
      return startServer(app, join(app, 'build/index.js'), [], port, { HOST: '127.0.0.1', PORT: String(port) });
    },
  },
};

// A proxy in front of `target` (an app's server): HTML gets `inject` after its doctype, and with
// `isolated` every request carries the cookie `isolated` (the apps then send the isolation
// headers). Resolves to { url, close }.
export async function serveWithAgent(target, isolated, inject) {
  const { hostname, port } = new URL(target);
  const server = createServer((req, res) => {
    const headers = { ...req.headers, host: `${hostname}:${port}`, 'accept-encoding': 'identity' };
    if (isolated) headers.cookie = [headers.cookie, 'isolated=1'].filter(Boolean).join('; ');
    const upstream = request({ hostname, port, path: req.url, method: req.method, headers }, (answer) => {
      const isHtml = /text\/html/.test(answer.headers['content-type'] ?? '');
      if (!isHtml) {
        res.writeHead(answer.statusCode, answer.headers);
        answer.pipe(res);
        return;
      }
      const chunks = [];
      answer.on('data', (chunk) => chunks.push(chunk));
      answer.on('end', () => {
        const html = injectInto(Buffer.concat(chunks).toString('utf8'), inject);
        const { 'content-length': _, 'transfer-encoding': __, ...rest } = answer.headers;
        res.writeHead(answer.statusCode, { ...rest, 'content-length': Buffer.byteLength(html) });
        res.end(html);
      });
    });
    upstream.on('error', (error) => { res.writeHead(502); res.end(String(error)); });
    req.pipe(upstream);
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    close: () => { server.closeAllConnections(); server.close(); },
  };
}

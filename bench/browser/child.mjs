// One page row of bench/run.mjs in a browser, in a process of its own as
// bench/child.mjs is in Node:
//   node bench/browser/child.mjs <engine> <threads> <workload id> <output file> [--browser=<name>]
// W rows (forwards) and D rows (decoding steps).
// engine: mha-wasm | onnxruntime-web; browser: chromium (default), firefox,
// webkit or webkit-sab (tests/e2e/driver/browsers.mjs). Launches the browser
// with a fresh profile through the e2e tests' driver (only launched on a
// start page; the agent injected in the page runs what this process sends,
// so no WebDriver session: Firefox driven over BiDi hangs pages that start
// many workers), serves the repository cross-origin isolated (COOP/COEP) on
// 127.0.0.1, opens bench/browser/page.html, measures there (page.js) and
// writes the output's float32 bytes to <output file> for run.mjs's check.
// Prints one JSON line: { medianMs, reps, baseMedianMs?, pairRatio?, info?, timerTickMs, browser }
// or { error }.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createStaticServer } from '../../scripts/static_server.mjs';
import { BROWSERS, launch } from '../../tests/e2e/driver/browsers.mjs';
import { ROOT_DIR, config, dataPath, findWorkload, modelPath } from '../lib/workloads.mjs';
import { reportResult } from '../lib/child_report.mjs';
import { isDecode } from '../lib/decode.mjs';

// Leaves run.mjs's cap (which kills this process) time to close the browser.
const DEADLINE_MS = (config.timing.childTimeoutSeconds - 20) * 1000;
const LOAD_TIMEOUT_MS = 60_000;
const SERVED = ['bench', 'build', 'dist', 'node_modules', 'web'];

const urlPath = (file) => `/${path.relative(ROOT_DIR, file).split(path.sep).join('/')}`;

// The processes below this one (the browser's), from /proc.
function descendants() {
  const children = new Map();
  for (const entry of fs.readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // The process has exited.
    }
  }
  const found = [];
  for (let queue = [process.pid]; queue.length;) {
    const next = children.get(queue.pop()) ?? [];
    found.push(...next);
    queue.push(...next);
  }
  return found;
}

// Browsers set their own threads' nice values (Chromium: 0 for a page's
// renderer and workers, whatever its parent's) and the driver starts them in
// a session, so an autogroup, of their own: both go back to this process's
// priority (run.mjs raises it for every child), else a run on a busy machine
// would time the page rows at a lower priority than the Node ones. Needs
// root to raise.
function matchPriority() {
  const nice = os.getPriority();
  const autogroup = fs.readFileSync('/proc/self/autogroup', 'utf8').match(/nice (-?\d+)/)?.[1];
  for (const pid of descendants()) {
    try {
      for (const tid of fs.readdirSync(`/proc/${pid}/task`)) os.setPriority(Number(tid), nice);
      if (autogroup !== undefined) fs.writeFileSync(`/proc/${pid}/autogroup`, autogroup);
    } catch {
      // Exited, or not permitted: the priority stays the browser's.
    }
  }
}

async function measureInPage(browser, base, request) {
  const { page } = browser;
  await page.goto(`${base}/bench/browser/page.html`);
  await page.waitForFunction(() => document.title === 'ready', null, { timeout: LOAD_TIMEOUT_MS });
  const end = Date.now() + DEADLINE_MS;
  try {
    await page.evaluate((r) => window.prepareRow(r), request, { timeout: end - Date.now() });
    matchPriority();  // now that the engine's workers exist
    const timing = isDecode(request.w) ? config.decodeTiming : config.timing;
    return await page.evaluate((t) => window.measureRow(t), timing, { timeout: end - Date.now() });
  } catch (error) {
    throw new Error([error.message.split('\n')[0], ...page.errors()].join('; '));
  }
}

function browserArg(args) {
  const name = args.find((a) => a.startsWith('--browser='))?.slice('--browser='.length) ?? 'chromium';
  if (!BROWSERS[name]) throw new Error(`--browser: unknown browser ${name} (known: ${Object.keys(BROWSERS).join(', ')})`);
  return name;
}

async function main(argv) {
  const [engine, threadsArg, workloadId, outputFile] = argv.filter((a) => !a.startsWith('--'));
  const name = browserArg(argv);
  const w = findWorkload(workloadId);
  const browser = await launch(name);
  const server = createStaticServer(ROOT_DIR, { servedDirs: SERVED, inject: browser.control.agentTag });
  try {
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
    const files = {
      data: urlPath(dataPath(w.id, '')),
      safetensors: urlPath(modelPath(w, 'safetensors')),
      onnx: urlPath(modelPath(w, 'onnx')),
    };
    // A D row of another precision: timed in alternation with its float32 row in the page.
    const base = isDecode(w) && w.base ? findWorkload(w.base) : undefined;
    const { output, ...result } = await measureInPage(browser, `http://127.0.0.1:${server.address().port}`,
      { engine, threads: Number(threadsArg), w, base, files });
    fs.writeFileSync(outputFile, Buffer.from(output, 'base64'));
    return { ...result, browser: `${BROWSERS[name].product} ${browser.version}` };
  } finally {
    server.close();
    await browser.close();
  }
}

await reportResult(main);

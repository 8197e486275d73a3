// One W row of bench/run.mjs in Chromium, in a process of its own as
// bench/child.mjs is in Node:
//   node bench/chromium/child.mjs <engine> <threads> <workload id> <output file>
// engine: mha-wasm | onnxruntime-web. Serves the repository cross-origin
// isolated (COOP/COEP) on 127.0.0.1, launches Chromium with a fresh profile,
// opens bench/chromium/page.html, measures there (page.js) and writes the
// output's float32 bytes to <output file> for run.mjs's check against
// PyTorch. Prints one JSON line: { medianMs, reps, info?, browser } or { error }.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createStaticServer } from '../../scripts/static_server.mjs';
import { launchBrowser } from '../../tests/e2e/harness.mjs';
import { ROOT_DIR, config, dataPath, findWorkload, modelPath } from '../lib/workloads.mjs';
import { reportResult } from '../lib/child_report.mjs';

// Leaves run.mjs's cap (which kills this process) time to close the browser.
const DEADLINE_MS = (config.timing.childTimeoutSeconds - 20) * 1000;
const SERVED = ['bench', 'build', 'dist', 'node_modules', 'web'];

const urlPath = (file) => `/${path.relative(ROOT_DIR, file).split(path.sep).join('/')}`;

function deadline(ms) {
  return new Promise((_, reject) => {
    setTimeout(() => reject(new Error(`no result after ${ms / 1000} s`)), ms).unref();
  });
}

// The processes below this one (Chromium's), from /proc.
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

// Chromium sets its own threads' nice values (0 for a page's renderer and
// workers, whatever its parent's) and Playwright starts it in a session, so
// an autogroup, of its own: both go back to this process's priority (run.mjs
// raises it for every child), else a run on a busy machine would time
// Chromium's rows at a lower priority than the Node ones. Needs root to raise.
function matchPriority() {
  const nice = os.getPriority();
  const autogroup = fs.readFileSync('/proc/self/autogroup', 'utf8').match(/nice (-?\d+)/)?.[1];
  for (const pid of descendants()) {
    try {
      for (const tid of fs.readdirSync(`/proc/${pid}/task`)) os.setPriority(Number(tid), nice);
      if (autogroup !== undefined) fs.writeFileSync(`/proc/${pid}/autogroup`, autogroup);
    } catch {
      // Exited, or not permitted: the priority stays Chromium's.
    }
  }
}

async function measureInPage(base, request) {
  const browser = await launchBrowser();
  try {
    const page = await browser.context.newPage();
    const pageErrors = [];
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(`${base}/bench/chromium/page.html`);
    await page.waitForFunction(() => document.title === 'ready', null, { timeout: 60_000 });
    const inPage = async () => {
      await page.evaluate((r) => window.prepareForward(r), request);
      matchPriority();  // now that the engine's workers exist
      return page.evaluate((timing) => window.measureForward(timing), config.timing);
    };
    try {
      return await Promise.race([inPage(), deadline(DEADLINE_MS)]);
    } catch (error) {
      throw new Error([error.message.split('\n')[0], ...pageErrors].join('; '));
    }
  } finally {
    await browser.close();
  }
}

async function main([engine, threadsArg, workloadId, outputFile]) {
  const w = findWorkload(workloadId);
  const server = createStaticServer(ROOT_DIR, { servedDirs: SERVED });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const files = {
      data: urlPath(dataPath(w.id, '')),
      safetensors: urlPath(modelPath(w, 'safetensors')),
      onnx: urlPath(modelPath(w, 'onnx')),
    };
    const { output, ...result } = await measureInPage(`http://127.0.0.1:${server.address().port}`,
      { engine, threads: Number(threadsArg), w, files });
    fs.writeFileSync(outputFile, Buffer.from(output, 'base64'));
    return result;
  } finally {
    server.close();
  }
}

await reportResult(main);

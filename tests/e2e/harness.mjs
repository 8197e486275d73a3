// Shared set-up for the browser tests: the demo server on a free port, Debian's Chromium driven by
// playwright-core with a fresh profile, console errors collected per page, and helpers that
// wait for the page's runs (the page reports them on <output id="result">).
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const RESULTS_DIR = join(ROOT, 'test-results');
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];
const RUN_TIMEOUT_MS = 60_000;

// Starts scripts/serve.mjs on a free port; resolves to { url, stop }.
export function startServer({ isolated = true } = {}) {
  const args = [join(ROOT, 'scripts/serve.mjs'), '--port', '0', ...(isolated ? [] : ['--no-isolation'])];
  const server = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let output = '';
    server.once('exit', (code) => reject(new Error(`serve.mjs exited with ${code}: ${output}`)));
    server.stdout.on('data', (chunk) => {
      output += chunk;
      const match = output.match(/http:\/\/127\.0\.0\.1:\d+\/\S*/);
      if (match) resolve({ url: match[0], stop: () => server.kill() });
    });
  });
}

// Launches Chromium headless with a fresh profile; resolves to { context, close }.
export async function launchBrowser() {
  const profile = mkdtempSync(join(tmpdir(), 'mha-e2e-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: CHROMIUM_ARGS,
    viewport: { width: 1400, height: 1000 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

// Opens the demo and waits for its first run. Returns { page, consoleErrors }.
export async function openDemo(context, url) {
  const page = await context.newPage();
  const consoleErrors = [];
  page.on('console', (message) => {
    if (message.type() === 'error') consoleErrors.push(message.text());
  });
  page.on('pageerror', (error) => consoleErrors.push(error.message));
  await page.goto(url);
  await waitForRunsAbove(page, 0);
  return { page, consoleErrors };
}

// For a test file: serves the demo (isolated or not) and opens it in a fresh Chromium at `query`
// before its tests, closes both after them. The returned object gets { page, consoleErrors }.
export function useDemoPage({ isolated = true, query = '' } = {}) {
  const demo = {};
  let server;
  let browser;
  before(async () => {
    server = await startServer({ isolated });
    browser = await launchBrowser();
    Object.assign(demo, await openDemo(browser.context, `${server.url}${query}`));
  });
  after(async () => {
    await browser?.close();
    server?.stop();
  });
  return demo;
}

export const resultState = (page) =>
  page.locator('#result').evaluate((element) => ({ ...element.dataset, runs: Number(element.dataset.runs) }));

// Waits until the page has finished more than `runs` runs and has none pending; returns its state.
export async function waitForRunsAbove(page, runs) {
  await page.waitForFunction(
    (before) => {
      const { dataset } = document.getElementById('result');
      return Number(dataset.runs) > before && (dataset.state === 'done' || dataset.state === 'error');
    },
    runs,
    { timeout: RUN_TIMEOUT_MS },
  );
  return resultState(page);
}

// Does `action` and waits for the run it causes; fails with the page's message if that run failed.
export async function runAfter(page, action) {
  const { runs } = await resultState(page);
  await action();
  const state = await waitForRunsAbove(page, runs);
  if (state.state !== 'done') throw new Error(`the page's run failed: ${state.error}`);
  return state;
}

export const parseTensor = (json) => JSON.parse(json);

export async function saveScreenshot(page, name) {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const path = join(RESULTS_DIR, name);
  await page.screenshot({ path, fullPage: true });
  return path;
}

// The tensors of a .safetensors file as { name: { dtype, shape, bytes } }, read straight from the
// file (independently of the page's reader).
export function readSafetensors(bytes) {
  const headerLength = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + headerLength).toString('utf8'));
  const tensors = {};
  for (const [name, { dtype, shape, data_offsets: [begin, end] = [] }] of Object.entries(header)) {
    if (name !== '__metadata__') tensors[name] = { dtype, shape, bytes: bytes.subarray(8 + headerLength + begin, 8 + headerLength + end) };
  }
  return tensors;
}

export function writeSafetensors(tensors) {
  const header = {};
  let offset = 0;
  for (const [name, { dtype, shape, bytes }] of Object.entries(tensors)) {
    header[name] = { dtype, shape, data_offsets: [offset, offset + bytes.length] };
    offset += bytes.length;
  }
  const json = Buffer.from(JSON.stringify(header));
  const length = Buffer.alloc(8);
  length.writeBigUInt64LE(BigInt(json.length));
  return Buffer.concat([length, json, ...Object.values(tensors).map((t) => t.bytes)]);
}

// A fixture's F32 tensor as { data, shape }, or null when the file has none of that name.
export function readFixtureTensor(bytes, name) {
  const tensor = readSafetensors(bytes)[name];
  if (!tensor) return null;
  if (tensor.dtype !== 'F32') throw new Error(`${name}: expected F32, found ${tensor.dtype}`);
  const data = new Float32Array(tensor.bytes.length / 4);
  for (let i = 0; i < data.length; i++) data[i] = tensor.bytes.readFloatLE(4 * i);
  return { data, shape: tensor.shape };
}

// Drops a file on the page the way a drag from the desktop does.
export async function dropFile(page, name, bytes) {
  const dataTransfer = await page.evaluateHandle(([fileName, content]) => {
    const transfer = new DataTransfer();
    transfer.items.add(new File([new Uint8Array(content)], fileName));
    return transfer;
  }, [name, [...bytes]]);
  await page.dispatchEvent('body', 'dragover', { dataTransfer });
  await page.dispatchEvent('body', 'drop', { dataTransfer });
}

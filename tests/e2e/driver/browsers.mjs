// The three browser engines the e2e suites run in, from Debian's packages, each only launched on
// the control server's start page (the test agent does the rest, see agent.js):
//   chromium    Chromium, through playwright-core (which adds screenshots and forced GC over CDP)
//   firefox     firefox-esr --headless, a fresh profile
//   webkit      WebKitGTK's MiniBrowser under xvfb-run, as shipped (no SharedArrayBuffer)
//   webkit-sab  the same with JSC_useSharedArrayBuffer=1, standing in for Safari's threads
// E2E_BROWSERS (comma-separated) picks which ones run; all four by default.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import { Control } from './control.mjs';
import { Page } from './page.mjs';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const FIREFOX = process.env.FIREFOX_PATH ?? '/usr/bin/firefox-esr';
const MULTIARCH = { x64: 'x86_64-linux-gnu', arm64: 'aarch64-linux-gnu' }[process.arch] ?? `${process.arch}-linux-gnu`;
const MINIBROWSER = process.env.MINIBROWSER_PATH ?? `/usr/lib/${MULTIARCH}/webkit2gtk-4.1/MiniBrowser`;
// --expose-gc: a page may collect its garbage to measure the memory it holds (streamed_load.test.mjs).
export const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync', '--js-flags=--expose-gc',
];
// A fresh Firefox profile that opens the given page and nothing else, and calls no one.
const FIREFOX_PREFS = {
  'browser.shell.checkDefaultBrowser': false,
  'browser.startup.homepage_override.mstone': 'ignore',
  'browser.aboutwelcome.enabled': false,
  'browser.sessionstore.resume_from_crash': false,
  'datareporting.policy.dataSubmissionEnabled': false,
  'toolkit.telemetry.reportingpolicy.firstRun': false,
  'app.update.disabledForTesting': true,
  'app.normandy.enabled': false,
  'extensions.update.enabled': false,
  'browser.safebrowsing.malware.enabled': false,
  'browser.safebrowsing.phishing.enabled': false,
  'network.captive-portal-service.enabled': false,
  'network.connectivity-service.enabled': false,
  'browser.newtabpage.enabled': false,
  'dom.disable_open_during_load': false,
};

const version = (command, args) => {
  try {
    return execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return 'unknown';
  }
};

// The process groups started here and not yet stopped: ended when this process ends, however it
// ends (a test file that fails or is killed must not leave a browser running).
const groups = new Set();
const killGroups = () => {
  for (const pid of groups) {
    try { process.kill(-pid, 'SIGKILL'); } catch { /* gone */ }
  }
};
process.once('exit', killGroups);
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    killGroups();
    process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
  });
}

// A process started in its own group, so that closing ends its children too (xvfb-run's Xvfb,
// the browser's content processes).
function startGroup(command, args, env) {
  const child = spawn(command, args, { detached: true, stdio: 'ignore', env: { ...process.env, ...env } });
  groups.add(child.pid);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  exited.then(() => groups.delete(child.pid));
  return {
    exited,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      try { process.kill(-child.pid, 'SIGTERM'); } catch { return; }
      const timer = setTimeout(() => { try { process.kill(-child.pid, 'SIGKILL'); } catch { /* gone */ } }, 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}

const noCapability = (label, what) => () => { throw new Error(`${label} has no ${what} without automation`); };

async function launchChromium(control, profile) {
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport: { width: 1400, height: 1000 },
  });
  const page = context.pages()[0] ?? await context.newPage();
  await page.goto(control.startUrl);
  const cdp = async (method) => {
    const session = await context.newCDPSession(page);   // anew: a cross-origin navigation swaps processes
    try { return await session.send(method); } finally { await session.detach().catch(() => {}); }
  };
  return {
    version: version(CHROMIUM, ['--version']).replace(/^Chromium\s+/, '').split(' ')[0],
    capabilities: { screenshots: true, 'forced garbage collection': true, 'JS heap size': true },
    screenshot: (path) => page.screenshot({ path, fullPage: true }),
    collectGarbage: () => cdp('HeapProfiler.collectGarbage'),
    jsHeapUsed: async () => (await cdp('Runtime.getHeapUsage')).usedSize,
    close: () => context.close(),
  };
}

async function launchFirefox(control, profile) {
  writeFileSync(join(profile, 'user.js'),
    Object.entries(FIREFOX_PREFS).map(([k, v]) => `user_pref(${JSON.stringify(k)}, ${JSON.stringify(v)});\n`).join(''));
  const group = startGroup(FIREFOX, ['--headless', '--no-remote', '--new-instance', '--profile', profile,
    '--window-size=1400,1000', control.startUrl], { MOZ_CRASHREPORTER_DISABLE: '1' });
  return {
    version: version(FIREFOX, ['--version']).replace(/^Mozilla Firefox\s+/, ''),
    capabilities: {},
    close: () => group.stop(),
  };
}

function webkitLauncher(sharedArrayBuffer) {
  return async (control, profile) => {
    const env = { XDG_CACHE_HOME: join(profile, 'cache'), XDG_DATA_HOME: join(profile, 'data'),
      XDG_CONFIG_HOME: join(profile, 'config'), ...(sharedArrayBuffer ? { JSC_useSharedArrayBuffer: '1' } : {}) };
    const group = startGroup('xvfb-run', ['-a', '-s', '-screen 0 1400x1000x24', MINIBROWSER, '--private', control.startUrl], env);
    return {
      version: version('dpkg-query', ['-W', '-f=${Version}', 'libwebkit2gtk-4.1-0']).split('-')[0],
      capabilities: {},
      close: () => group.stop(),
    };
  };
}

// What each engine is expected to have (the tests check the package's choices against these),
// and how the README's browser table names it (product, variant, notes).
export const BROWSERS = {
  chromium: {
    label: 'Chromium', engine: 'Blink', product: 'Chromium', launch: launchChromium,
    sharedArrayBuffer: true, relaxedSimd: true, notes: '',
  },
  firefox: {
    label: 'Firefox', engine: 'Gecko', product: 'Firefox', launch: launchFirefox,
    sharedArrayBuffer: true, relaxedSimd: true, notes: '',
  },
  webkit: {
    label: 'WebKit', engine: 'WebKit', product: 'WebKitGTK', launch: webkitLauncher(false),
    sharedArrayBuffer: false, relaxedSimd: false,
    notes: 'WebKitGTK has never enabled SharedArrayBuffer (WebKit bug 268068)',
  },
  'webkit-sab': {
    label: 'WebKit with JSC_useSharedArrayBuffer=1', engine: 'WebKit', product: 'WebKitGTK',
    variant: 'with `JSC_useSharedArrayBuffer=1`', launch: webkitLauncher(true), sharedArrayBuffer: true,
    relaxedSimd: false, notes: "stands in for Safari, which has SharedArrayBuffer on isolated pages",
  },
};

export function browserNames() {
  const names = (process.env.E2E_BROWSERS ?? Object.keys(BROWSERS).join(',')).split(',').map((s) => s.trim()).filter(Boolean);
  for (const name of names) {
    if (!BROWSERS[name]) throw new Error(`E2E_BROWSERS: unknown browser ${name} (known: ${Object.keys(BROWSERS).join(', ')})`);
  }
  return names;
}

// Starts browser `name` on a fresh profile with its control server; resolves to
// { name, label, version, control, page, close() }, the page on the blank start page.
export async function launch(name) {
  const spec = BROWSERS[name];
  const control = await new Control().start();
  const profile = mkdtempSync(join(tmpdir(), `mha-e2e-${name}-`));
  const loaded = control.nextLoad(() => true, 60_000);
  let handle;
  try {
    handle = await spec.launch(control, profile);
    await loaded;
  } catch (error) {
    await handle?.close();
    control.close();
    rmSync(profile, { recursive: true, force: true });
    throw error;
  }
  const browser = {
    name,
    label: spec.label,
    spec,
    version: handle.version,
    capabilities: handle.capabilities,
    control,
    screenshot: handle.screenshot ?? noCapability(spec.label, 'screenshots'),
    collectGarbage: handle.collectGarbage ?? noCapability(spec.label, 'forced garbage collection'),
    jsHeapUsed: handle.jsHeapUsed ?? noCapability(spec.label, 'JS heap size'),
    async close() {
      control.close();
      await handle.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
  browser.page = new Page(control, browser);
  return browser;
}

// The page API the browser tests use, the same in every browser: a subset of playwright's
// (goto, evaluate, waitForFunction, locator(...).click/fill/check/..., setInputFiles, mouse),
// carried out by the test agent inside the page (agent.js, window.e2e), so it needs nothing of
// the browser but to load pages. Input is synthetic DOM events, not the OS's.
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const CALL_TIMEOUT_MS = 60_000;

// Files as playwright takes them (a path or { name, mimeType, buffer }), for the agent.
function filePayload(files) {
  return [files].flat().map((file) => (typeof file === 'string'
    ? { name: basename(file), type: '', base64: readFileSync(file).toString('base64') }
    : { name: file.name, type: file.mimeType ?? '', base64: Buffer.from(file.buffer).toString('base64') }));
}

export class Locator {
  constructor(page, selector, index = 0) {
    this.page = page;
    this.selector = selector;
    this.index = index;
  }

  // Runs window.e2e[method](selector, index, ...args) in the page.
  #e2e(method, ...args) {
    return this.page.evaluate(([m, s, i, a]) => window.e2e[m](s, i, ...a), [method, this.selector, this.index, args]);
  }

  first() { return new Locator(this.page, this.selector, 0); }
  click(options = {}) { return this.#e2e('click', options.position ?? null); }
  hover(options = {}) { return this.#e2e('hover', options.position ?? { x: 1, y: 1 }); }
  fill(value) { return this.#e2e('fill', String(value)); }
  check() { return this.#e2e('setChecked', true); }
  uncheck() { return this.#e2e('setChecked', false); }
  selectOption(value) { return this.#e2e('selectOption', value); }
  setInputFiles(files) { return this.#e2e('setInputFiles', filePayload(files)); }
  dispatchEvent(type) { return this.#e2e('dispatchEvent', type); }
  async textContent() { return (await this.#e2e('state')).textContent; }
  async inputValue() { return (await this.#e2e('state')).value; }
  async isDisabled() { return (await this.#e2e('state')).disabled; }
  async isVisible() { return (await this.#e2e('state')).visible; }
  async isHidden() { return !(await this.#e2e('state')).visible; }
  async boundingBox() { return (await this.#e2e('state')).box; }

  // fn(element, arg) in the page.
  evaluate(fn, arg) {
    return this.page.evaluate(([s, i, source, a]) => (0, eval)(`(${source})`)(window.e2e.element(s, i), a),
      [this.selector, this.index, fn.toString(), arg]);
  }

  // fn(elements, arg) in the page, all the elements that match.
  evaluateAll(fn, arg) {
    return this.page.evaluate(([s, source, a]) => (0, eval)(`(${source})`)([...document.querySelectorAll(s)], a),
      [this.selector, fn.toString(), arg]);
  }
}

export class Page {
  // control: the browser's Control; browser: its launcher's handle (capabilities, name).
  constructor(control, browser) {
    this.control = control;
    this.browser = browser;
    const mouseAction = (action, x, y) => this.evaluate(([a, px, py]) => window.e2e.mouse(a, px, py), [action, x, y]);
    let position = { x: 0, y: 0 };
    this.mouse = {
      async move(x, y, { steps = 1 } = {}) {
        const from = position;
        for (let i = 1; i <= steps; i++) {
          await mouseAction('move', from.x + ((x - from.x) * i) / steps, from.y + ((y - from.y) * i) / steps);
        }
        position = { x, y };
      },
      down: () => mouseAction('down'),
      up: () => mouseAction('up'),
    };
  }

  // The page's console errors and uncaught errors since `since` (an index into the messages).
  errors(since = 0) {
    return this.control.messages.slice(since).filter((m) => m.kind !== 'warning').map((m) => m.text);
  }

  warnings(since = 0) {
    return this.control.messages.slice(since).filter((m) => m.kind === 'warning').map((m) => m.text);
  }

  get messageCount() {
    return this.control.messages.length;
  }

  // Loads `url` in the browser's tab; resolves once its agent has reported in.
  async goto(url) {
    const loaded = this.control.nextLoad((u) => u.split('#')[0] === new URL(url).href.split('#')[0] ||
      new URL(u).origin === new URL(url).origin);
    // Its answer may be lost to the navigation it starts: the new page's report is what counts.
    this.evaluate((target) => { location.href = target; }, url).catch(() => {});
    await loaded;
  }

  evaluate(fn, arg, { timeout = CALL_TIMEOUT_MS } = {}) {
    const source = typeof fn === 'function' ? fn.toString() : `() => (${fn})`;
    return this.control.call(source, arg ?? null, timeout);
  }

  // Resolves with fn(arg)'s value once it is truthy (fn runs in the page every 20 ms).
  waitForFunction(fn, arg, { timeout = 60_000 } = {}) {
    const poll = async ([source, a, ms]) => {
      const test = (0, eval)(`(${source})`);
      const end = performance.now() + ms;
      for (;;) {
        const value = await test(a);
        if (value) return value;
        if (performance.now() > end) throw new Error(`waitForFunction: still false after ${ms} ms: ${source}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    return this.evaluate(poll, [fn.toString(), arg ?? null, timeout], { timeout: timeout + 10_000 }).catch((error) => {
      this.control.timedOut = true;   // the page is stuck as much as when it does not answer
      throw error;
    });
  }

  locator(selector) {
    return new Locator(this, selector);
  }

  setInputFiles(selector, files) {
    return this.locator(selector).setInputFiles(files);
  }

  // Drops files on the page (on `selector`) the way a drag from the desktop does.
  dropFiles(selector, files) {
    return this.evaluate(([s, f]) => window.e2e.drop(s, 0, f), [selector, filePayload(files)]);
  }

  // What this browser can do beyond the page API, or a message naming what it cannot.
  unsupported(capability) {
    return this.browser.capabilities[capability] ? null : `${this.browser.label} has no ${capability} without automation`;
  }

  async screenshot(path) {
    return this.browser.screenshot(path);
  }

  // Forces a garbage collection in the page (where the browser lets the harness).
  collectGarbage() {
    return this.browser.collectGarbage();
  }

  // The page's JS heap in use, in bytes (where the browser lets the harness read it).
  jsHeapUsed() {
    return this.browser.jsHeapUsed();
  }
}

// The test agent, injected as the first script of every page a browser test opens (a classic
// script, so it runs before the page's modules). It reports the page's console errors and
// warnings and its uncaught errors to the control server it came from, and runs the functions the
// test sends (long-polled over fetch): the browser only has to be launched on a URL, no WebDriver
// or DevTools session (Firefox driven over WebDriver BiDi hangs pages that start many workers).
// window.e2e has the in-page half of the harness's page API (tests/e2e/driver/page.mjs).
(() => {
  const control = new URL(document.currentScript.src).origin;
  // JSON both ways, with the numbers JSON has no words for (see control.mjs).
  const NUMBERS = { NaN, Infinity, '-Infinity': -Infinity };
  const replacer = (key, value) => (typeof value === 'number' && !Number.isFinite(value) ? { $number: String(value) } : value);
  const reviver = (key, value) => (value?.$number !== undefined ? NUMBERS[value.$number] : value);
  const load = `${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const post = (path, body) => fetch(`${control}${path}`, {
    method: 'POST', body: JSON.stringify({ load, ...body }), headers: { 'Content-Type': 'text/plain' },
  });
  const report = (kind, text) => post('/event', { kind, text, url: location.href }).catch(() => {});
  for (const [level, kind] of [['error', 'error'], ['warn', 'warning']]) {
    const original = console[level];
    console[level] = (...args) => {
      report(kind, args.map((a) => (a instanceof Error ? a.message : String(a))).join(' '));
      return original.apply(console, args);
    };
  }
  addEventListener('error', (event) => {
    if (event.error !== undefined || event.message) report('pageerror', event.message);
  });
  addEventListener('unhandledrejection', (event) => report('pageerror', String(event.reason?.message ?? event.reason)));

  // Workers the page makes, so that a test can end one from outside.
  const PageWorker = window.Worker;
  window.createdWorkers = [];
  window.Worker = class extends PageWorker {
    constructor(...args) {
      super(...args);
      window.createdWorkers.push(this);
    }
  };

  const element = (selector, index = 0) => {
    const found = document.querySelectorAll(selector)[index];
    if (!found) throw new Error(`no element matches ${selector}${index ? ` [${index}]` : ''}`);
    return found;
  };
  const fire = (target, type, init = {}) => target.dispatchEvent(new Event(type, { bubbles: true, ...init }));
  // The agent's pointer is pointerId 1 (the mouse's in Chromium and WebKit). Headless Firefox
  // has no active mouse pointer until the OS moves one, so a page's setPointerCapture throws for
  // the synthetic one: capture is skipped for it (only it, only that error).
  const SYNTHETIC_POINTER = 1;
  const capture = Element.prototype.setPointerCapture;
  Element.prototype.setPointerCapture = function setPointerCapture(id) {
    try {
      return capture.call(this, id);
    } catch (error) {
      if (id !== SYNTHETIC_POINTER || error.name !== 'NotFoundError') throw error;
      return undefined;
    }
  };
  const pointer = (target, type, x, y, buttons) => {
    const init = { bubbles: true, cancelable: true, composed: true, clientX: x, clientY: y, buttons, button: 0 };
    const PointerType = type.startsWith('pointer') ? PointerEvent : MouseEvent;
    target.dispatchEvent(new PointerType(type, { ...init, pointerId: SYNTHETIC_POINTER, pointerType: 'mouse', isPrimary: true }));
  };
  const toFiles = (files) => {
    const transfer = new DataTransfer();
    for (const { name, base64, type } of files) {
      const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
      transfer.items.add(new File([bytes], name, { type }));
    }
    return transfer;
  };
  let mouse = { x: 0, y: 0, buttons: 0 };
  const at = (x, y) => document.elementFromPoint(x, y) ?? document.body;

  window.e2e = {
    element,
    click(selector, index, position) {
      const target = element(selector, index);
      if (!position) return target.click();
      const box = target.getBoundingClientRect();
      const [x, y] = [box.left + position.x, box.top + position.y];
      pointer(target, 'pointerdown', x, y, 1);
      pointer(target, 'mousedown', x, y, 1);
      pointer(target, 'pointerup', x, y, 0);
      pointer(target, 'mouseup', x, y, 0);
      pointer(target, 'click', x, y, 0);
    },
    hover(selector, index, position) {
      const target = element(selector, index);
      const box = target.getBoundingClientRect();
      pointer(target, 'pointermove', box.left + position.x, box.top + position.y, 0);
      pointer(target, 'mousemove', box.left + position.x, box.top + position.y, 0);
    },
    // page.mouse: moves, presses and releases the primary button at client coordinates.
    mouse(action, x, y) {
      if (action === 'move') {
        mouse = { ...mouse, x, y };
        pointer(at(x, y), 'pointermove', x, y, mouse.buttons);
      } else {
        mouse.buttons = action === 'down' ? 1 : 0;
        pointer(at(mouse.x, mouse.y), action === 'down' ? 'pointerdown' : 'pointerup', mouse.x, mouse.y, mouse.buttons);
      }
    },
    fill(selector, index, value) {
      const target = element(selector, index);
      target.focus();
      target.value = value;
      fire(target, 'input');
      fire(target, 'change');
    },
    setChecked(selector, index, checked) {
      const target = element(selector, index);
      if (target.checked !== checked) target.click();
    },
    selectOption(selector, index, value) {
      const target = element(selector, index);
      target.value = value;
      fire(target, 'input');
      fire(target, 'change');
    },
    setInputFiles(selector, index, files) {
      const target = element(selector, index);
      target.files = toFiles(files).files;
      fire(target, 'input');
      fire(target, 'change');
    },
    // A drop of files on `selector` the way a drag from the desktop does it.
    drop(selector, index, files) {
      const dataTransfer = toFiles(files);
      for (const type of ['dragover', 'drop']) {
        element(selector, index).dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer }));
      }
    },
    dispatchEvent(selector, index, type) {
      fire(element(selector, index), type);
    },
    state(selector, index) {
      const target = element(selector, index);
      // In view, so that mouse events at its coordinates reach it.
      target.scrollIntoView({ block: 'nearest', inline: 'nearest' });
      const box = target.getBoundingClientRect();
      const style = getComputedStyle(target);
      return {
        textContent: target.textContent,
        value: target.value,
        disabled: target.disabled === true,
        visible: box.width > 0 && box.height > 0 && style.visibility !== 'hidden',
        box: { x: box.left, y: box.top, width: box.width, height: box.height },
      };
    },
  };

  async function run({ id, source, arg }) {
    let reply;
    try {
      const fn = (0, eval)(`(${source})`);
      reply = { ok: true, value: await fn(arg) };
    } catch (error) {
      reply = { ok: false, message: String(error?.message ?? error), stack: String(error?.stack ?? '') };
    }
    let body;
    try {
      body = JSON.stringify({ load, id, ...reply }, replacer);
    } catch (error) {
      body = JSON.stringify({ load, id, ok: false, message: `the result is not JSON: ${error.message}` });
    }
    await fetch(`${control}/result`, { method: 'POST', body, headers: { 'Content-Type': 'text/plain' } });
  }

  // From the load event on, as playwright's goto: the page's module scripts have run by then.
  (async function poll() {
    if (document.readyState !== 'complete') await new Promise((resolve) => addEventListener('load', resolve, { once: true }));
    for (;;) {
      let commands;
      try {
        commands = JSON.parse(await (await post('/poll', { url: location.href })).text(), reviver);
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 200));
        continue;
      }
      if (commands === 'stop') return;
      for (const command of commands) run(command);
    }
  })();
})();

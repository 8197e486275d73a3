// The control server of one browser: serves the test agent (agent.js) and a blank start page,
// hands the agent of the page open in that browser the functions to run (long poll) and takes
// back their results and the page's console messages. One browser, one tab: a new page load
// replaces the previous one (its agent is told to stop, its pending calls fail).
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';

const AGENT = readFileSync(new URL('./agent.js', import.meta.url));
const POLL_HOLD_MS = 15_000;
// The agent is a cross-origin script of isolated pages: it needs CORP, and its fetches CORS.
const HEADERS = {
  'Access-Control-Allow-Origin': '*',
  'Cross-Origin-Resource-Policy': 'cross-origin',
  'Cache-Control': 'no-store',
};

// Values cross as JSON, the numbers it has no words for as { $number: 'NaN' } (agent.js too).
const NUMBERS = { NaN, Infinity, '-Infinity': -Infinity };
const replacer = (key, value) => (typeof value === 'number' && !Number.isFinite(value) ? { $number: String(value) } : value);
const reviver = (key, value) => (value?.$number !== undefined ? NUMBERS[value.$number] : value);

const readBody = (request) => new Promise((resolve, reject) => {
  let body = '';
  request.setEncoding('utf8');
  request.on('data', (chunk) => { body += chunk; });
  request.on('end', () => resolve(body ? JSON.parse(body, reviver) : {}));
  request.on('error', reject);
});

export class Control {
  #server;
  #seen = new Set();
  #current = null; // { load, url }
  #queue = [];
  #heldPoll = null; // { load, reply(commands), timer }
  #pending = new Map(); // id -> { resolve, reject, load }
  #loadWaiters = [];
  #nextId = 1;
  messages = []; // { kind: 'error' | 'warning' | 'pageerror', text, url }
  timedOut = false; // whether a call of the page open has had no answer in time

  async start() {
    this.#server = createServer((request, response) => {
      this.#handle(request, response).catch((error) => {
        response.writeHead(500, HEADERS);
        response.end(String(error.stack));
      });
    });
    await new Promise((resolve) => this.#server.listen(0, '127.0.0.1', resolve));
    this.origin = `http://127.0.0.1:${this.#server.address().port}`;
    this.agentUrl = `${this.origin}/agent.js`;
    this.startUrl = `${this.origin}/start`;
    return this;
  }

  // The tag that loads the agent, for the servers of the pages under test to put in their HTML.
  get agentTag() {
    return `<script src="${this.agentUrl}"></script>`;
  }

  close() {
    this.#heldPoll?.reply('stop');
    for (const { reject } of this.#pending.values()) reject(new Error('the browser was closed'));
    this.#server?.closeAllConnections?.();
    this.#server?.close();
  }

  get currentUrl() {
    return this.#current?.url ?? null;
  }

  // Resolves with the URL of the next page load (one whose URL `matches`, when given).
  nextLoad(matches = () => true, timeoutMs = 60_000) {
    return new Promise((resolve, reject) => {
      const waiter = { matches, resolve };
      const timer = setTimeout(() => {
        this.#loadWaiters = this.#loadWaiters.filter((w) => w !== waiter);
        reject(new Error(`no page load in ${timeoutMs} ms (the page open: ${this.currentUrl})`));
      }, timeoutMs);
      waiter.resolve = (url) => { clearTimeout(timer); resolve(url); };
      this.#loadWaiters.push(waiter);
    });
  }

  // Runs `source` (a function's text) with `arg` in the page; resolves to its JSON result.
  call(source, arg, timeoutMs) {
    if (!this.#current) return Promise.reject(new Error('no page is open'));
    const id = this.#nextId++;
    const load = this.#current.load;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.#pending.delete(id);
        this.timedOut = true;
        reject(new Error(`the page did not answer in ${timeoutMs} ms: ${source.slice(0, 200)}`));
      }, timeoutMs);
      const settle = (fn) => (value) => { clearTimeout(timer); this.#pending.delete(id); fn(value); };
      this.#pending.set(id, { resolve: settle(resolve), reject: settle(reject), load });
      this.#queue.push({ id, source, arg });
      this.#flush();
    });
  }

  #flush() {
    if (!this.#heldPoll || this.#queue.length === 0) return;
    const commands = this.#queue.splice(0);
    this.#heldPoll.reply(commands);
  }

  #register(load, url) {
    if (this.#current?.load === load) return true;
    if (this.#seen.has(load)) return false;
    this.#seen.add(load);
    for (const [id, call] of this.#pending) {
      this.#pending.delete(id);
      call.reject(new Error(`the page was replaced by ${url} before it answered`));
    }
    this.#queue = [];
    this.#heldPoll?.reply('stop');
    this.#current = { load, url };
    this.timedOut = false;
    const waiters = this.#loadWaiters;
    this.#loadWaiters = waiters.filter((w) => !w.matches(url));
    for (const w of waiters) if (w.matches(url)) w.resolve(url);
    return true;
  }

  async #handle(request, response) {
    const { pathname } = new URL(request.url, this.origin);
    const send = (status, body, type = 'application/json') => {
      response.writeHead(status, { ...HEADERS, 'Content-Type': type });
      response.end(body);
    };
    if (request.method === 'GET' && pathname === '/agent.js') return send(200, AGENT, 'text/javascript');
    if (request.method === 'GET' && pathname === '/start') {
      return send(200, `<!doctype html><meta charset="utf-8"><title>e2e</title>${this.agentTag}`, 'text/html');
    }
    if (request.method === 'GET' && pathname === '/favicon.ico') return send(404, '', 'text/plain');
    if (request.method !== 'POST') return send(404, '"not found"');
    const body = await readBody(request);
    if (pathname === '/event') {
      this.messages.push({ kind: body.kind, text: body.text, url: body.url });
      return send(200, '{}');
    }
    if (pathname === '/result') {
      const call = this.#pending.get(body.id);
      if (call && call.load === body.load) {
        if (body.ok) call.resolve(body.value);
        else call.reject(Object.assign(new Error(`in the page: ${body.message}`), { pageStack: body.stack }));
      }
      return send(200, '{}');
    }
    if (pathname === '/poll') {
      if (!this.#register(body.load, body.url)) return send(200, '"stop"');
      this.#heldPoll?.reply([]);
      const poll = { load: body.load };
      poll.reply = (commands) => {
        clearTimeout(poll.timer);
        if (this.#heldPoll === poll) this.#heldPoll = null;
        send(200, JSON.stringify(commands, replacer));
      };
      poll.timer = setTimeout(() => poll.reply([]), POLL_HOLD_MS);
      // A page that goes away mid-poll (navigation) leaves no poll to answer.
      response.on('close', () => { if (this.#heldPoll === poll) this.#heldPoll = null; });
      this.#heldPoll = poll;
      this.#flush();
      return undefined;
    }
    return send(404, '"not found"');
  }
}

// The page's side of engine-worker.js: one worker at a time, requests matched to replies by id.
// If the worker dies (a failed import, a crashed runtime) every pending request fails with a
// readable message and the next start() spawns a fresh worker, so the page itself never dies.
export class EngineClient {
  #worker = null;
  #pending = new Map(); // id -> { resolve, reject }
  #nextId = 1;

  // Spawns a fresh worker with the engine loaded for `threads` threads; resolves to
  // { info, isolated } as the worker reports them.
  async start(threads) {
    this.stop();
    const worker = new Worker(new URL('./engine-worker.js', import.meta.url), { type: 'module' });
    worker.onmessage = ({ data }) => this.#settle(data);
    worker.onerror = (event) => {
      event.preventDefault();
      this.#failAll(`the engine worker crashed: ${event.message || 'failed to load its scripts'}`);
      if (this.#worker === worker) this.stop();
    };
    worker.onmessageerror = () => this.#failAll('the engine worker sent a message that could not be read');
    this.#worker = worker;
    try {
      return await this.#request({ type: 'init', threads });
    } catch (error) {
      if (this.#worker === worker) this.stop(); // a worker without an engine is of no use
      throw error;
    }
  }

  stop() {
    this.#worker?.terminate();
    this.#worker = null;
    this.#failAll('stopped: the engine was restarted before this run finished');
  }

  get running() {
    return this.#worker !== null;
  }

  // Inputs are copied, not transferred: the page keeps them for the next run.
  run(request) {
    return this.#request({ type: 'run', ...request });
  }

  #request(message) {
    if (!this.#worker) return Promise.reject(new Error('the engine is not running'));
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, ...message });
    });
  }

  #settle(reply) {
    const pending = this.#pending.get(reply.id);
    if (!pending) return;
    this.#pending.delete(reply.id);
    if (reply.type === 'error') pending.reject(new Error(reply.message));
    else pending.resolve(reply);
  }

  #failAll(message) {
    for (const { reject } of this.#pending.values()) reject(new Error(message));
    this.#pending.clear();
  }
}

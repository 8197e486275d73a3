// The proxy's worker for Node (web/src/proxy_worker_node.js), for proxy.test.js: its first
// forward call arrives unreadable (a 'messageerror' in place of the message), as a browser's
// worker may fail to deserialize a message.
import { parentPort } from 'node:worker_threads';

const on = parentPort.on.bind(parentPort);
let onUnreadable = () => {};
let lost = false;
parentPort.on = (event, listener) => {
  if (event === 'messageerror') onUnreadable = listener;
  else if (event !== 'message') on(event, listener);
  else {
    on(event, (data) => {
      const unreadable = !lost && data.op === 'call' && data.method === 'forward';
      lost ||= unreadable;
      if (unreadable) onUnreadable({});
      else listener(data);
    });
  }
  return parentPort;
};
await import('../../../web/src/proxy_worker_node.js');

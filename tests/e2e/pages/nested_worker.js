// Starts 8 workers (this same script, told to only answer) and reports how many answered.
if (self.name === 'leaf') {
  self.postMessage('up');
} else {
  let up = 0;
  for (let i = 0; i < 8; i++) {
    const leaf = new Worker(new URL(import.meta.url), { type: 'module', name: 'leaf' });
    leaf.onmessage = () => self.postMessage(++up);
  }
}

// Randomness for proxy_channel.test.js, reproducible from a seed.

// Numbers in [0, 1) (an LCG seeded by `seed`).
export function lcg(seed) {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

// A `pause()` for the proxy channel's hook: at a random `rate` of the points, this thread sleeps
// 0-2 ms (Atomics.wait on a word of its own), so that the other side runs in between.
export function pauses(seed, rate) {
  const sleeper = new Int32Array(new SharedArrayBuffer(4));
  const random = lcg(seed);
  return () => {
    if (random() < rate) Atomics.wait(sleeper, 0, 0, 2 * random());
  };
}

// Makes this thread's wake-ups unreliable at a random `rate`: Atomics.notify wakes no one, and
// Atomics.waitAsync's promise never settles (as an engine that loses a wake-up would).
export function loseWakeUps(seed, rate) {
  const random = lcg(seed);
  const { notify, waitAsync } = Atomics;
  Atomics.notify = (...args) => (random() < rate ? 0 : notify(...args));
  Atomics.waitAsync = (...args) => {
    const result = waitAsync(...args);
    return result.async && random() < rate ? { async: true, value: new Promise(() => {}) } : result;
  };
}

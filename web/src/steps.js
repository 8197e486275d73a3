// Runs a generator that yields what it waits for (a Promise, or a value at
// hand): synchronously for as long as nothing it yields is a Promise, so that
// a load from bytes in memory is done when its call returns, as it always
// was; from the first Promise on, asynchronously (the result is a Promise).
// Errors reach the generator (its finally blocks run) and then the caller.
export function runSteps(steps) {
  let step = steps.next();
  while (!step.done) {
    if (step.value instanceof Promise) return finish(steps, step.value);
    step = steps.next(step.value);
  }
  return step.value;
}

async function finish(steps, pending) {
  let step = { value: pending, done: false };
  while (!step.done) {
    let value;
    try {
      value = await step.value;
    } catch (error) {
      step = steps.throw(error);
      continue;
    }
    step = steps.next(value);
  }
  return step.value;
}

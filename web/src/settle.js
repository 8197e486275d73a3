// Runs `work` now, in the calling thread, and reports its result or error as
// a Promise: for methods that return Promises in every mode (through the
// proxy they cannot finish synchronously) but compute synchronously here.
export function settle(work) {
  try {
    return Promise.resolve(work());
  } catch (error) {
    return Promise.reject(error);
  }
}

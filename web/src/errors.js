// The one error type of the package: thrown by its synchronous methods and
// getters, the rejection of its Promise-returning ones. Messages name the
// argument, what was expected and what was received.
export class MHAError extends Error {
  constructor(message) {
    super(message);
    this.name = 'MHAError';
  }
}

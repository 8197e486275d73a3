// The one error type the package throws for bad input. Messages name the
// argument, what was expected and what was received.
export class MHAError extends Error {
  constructor(message) {
    super(message);
    this.name = 'MHAError';
  }
}

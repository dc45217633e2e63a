// An error a user or operator can cause carries a stable `code`: scripts, tests, logs and the CLI's
// one-line failure match on it, while the message (which says what to do next) may be reworded.
export class CodedError<Code extends string = string> extends Error {
  readonly code: Code;
  constructor(code: Code, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
  }
}

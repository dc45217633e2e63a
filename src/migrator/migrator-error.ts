// Errors an author or operator can cause while creating, checking or applying migrations. Each has a
// stable `code` (scripts and tests match on it) and a message saying what to do next.
export class MigratorError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'MigratorError';
  }
}

// Errors an author or operator can cause while creating, checking or applying migrations. Each has a
// stable `code` (scripts and tests match on it) and a message saying what to do next.
import { CodedError } from '../errors/coded-error.ts';

export class MigratorError extends CodedError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'MigratorError';
  }
}

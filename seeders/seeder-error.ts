// Errors an operator can cause while seeding (bad catalog file, missing bootstrap variable, refused
// rescope...). Each has a stable `code` the migrator keeps in its one-line failure; messages say what
// to fix and never carry a secret value.
import { CodedError } from '../src/errors/coded-error.ts';

export class SeederError extends CodedError {
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'SeederError';
  }
}

// Errors an operator can cause while seeding (bad catalog file, missing bootstrap variable, refused
// rescope...). Each has a stable `code` the migrator keeps in its one-line failure; messages say what
// to fix and never carry a secret value.
export class SeederError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'SeederError';
  }
}

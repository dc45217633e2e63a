// What the operator commands print. Run and queue-message fields (a unit name from a dead-letter
// message, an error message a handler threw) are not ours: printed raw, a control sequence in one
// could set the terminal's title, clear it, or move the cursor over other lines. Every character a
// terminal or a reader may act on is printed as a `\uXXXX` escape instead.

/** C0 controls, DEL, C1 controls, line/paragraph separators and bidi embeddings/overrides/isolates. */
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const CONTROL_BUT_NEWLINE = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const escape = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * The text with every control character escaped. `keepNewlines` (default false) keeps `\n` for a
 * whole multi-line text whose lines the caller built; a single field never keeps it.
 */
export function terminalText(text: string, options: { keepNewlines?: boolean } = {}): string {
  return text.replace(options.keepNewlines ? CONTROL_BUT_NEWLINE : CONTROL, escape);
}

/** JSON.stringify, with the controls JSON leaves raw (DEL, C1, U+2028/2029, bidi) escaped too: still valid, lossless JSON. */
export function terminalJson(value: unknown): string {
  return JSON.stringify(value).replace(CONTROL, escape);
}

/** Prints one line on stdout (a newline inside it escaped too). */
export function printLine(text: string): void {
  console.log(terminalText(text));
}

/** Prints a text whose lines the caller built (a table) on stdout: lines kept, every other control escaped. */
export function printText(text: string): void {
  console.log(terminalText(text, { keepNewlines: true }));
}

/** Prints one JSON line on stdout. */
export function printJson(value: unknown): void {
  console.log(terminalJson(value));
}

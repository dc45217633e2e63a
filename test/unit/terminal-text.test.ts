// What the operator commands print: a field read from a queue message or a run (a unit name, an error
// message) never reaches the terminal as a control sequence.
import { describe, expect, it } from 'vitest';
import { terminalJson, terminalText } from '../../src/main/terminal-text.ts';

describe('terminal-safe printing', () => {
  it('escapes C0 (newline and tab too), DEL, C1, U+2028/2029 and bidi overrides in a field; leaves other text alone', () => {
    expect(terminalText('evil\u001b]0;pwned\u0007\u001b[2J')).toBe('evil\\u001b]0;pwned\\u0007\\u001b[2J');
    expect(terminalText('a\nb\tc\u007f\u0085\u009b\u2028\u2029\u202e\u2066')).toBe('a\\u000ab\\u0009c\\u007f\\u0085\\u009b\\u2028\\u2029\\u202e\\u2066');
    expect(terminalText('billing.send_invoice São Paulo ✓ 日本')).toBe('billing.send_invoice São Paulo ✓ 日本');
  });

  it('keeps the lines of a whole text when asked, escaping the rest', () => {
    expect(terminalText('one\u001b[2J\ntwo\r', { keepNewlines: true })).toBe('one\\u001b[2J\ntwo\\u000d');
  });

  it('prints JSON with every such character as a JSON escape, so parsing gives the original back', () => {
    const value = { unit: 'evil\u001b]0;\u0007\u009b\u2028\u202e\u007f', n: 1 };
    const line = terminalJson(value);
    expect(line).not.toMatch(/[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/);
    expect(JSON.parse(line)).toEqual(value);
  });
});

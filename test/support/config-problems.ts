// Config tests read the problems a refused environment produced; a parse that succeeds fails the test.
import { expect } from 'vitest';
import { ConfigError } from '../../src/config/parse.ts';

/** The problems (variable, rule) of the ConfigError `parse` throws. */
export function configProblems(parse: () => unknown): Array<{ variable: string; rule: string }> {
  try {
    parse();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error('expected a ConfigError');
}

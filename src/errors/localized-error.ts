// Domain errors (access, bank users, brokers, tenancy) keep their messages in a table keyed by the
// stable code, in English and Portuguese, so every language is written beside the code it explains.
// The thrown error carries the English text; a caller that knows the reader's language reads the
// table. Messages never echo a credential or a value the caller sent.
import { CodedError } from './coded-error.ts';

/** One message in every language the service speaks. */
export interface LocalizedMessage {
  en: string;
  pt: string;
}

/** A feature's message table: stable code → message. */
export type LocalizedMessages<Code extends string = string> = Readonly<Record<Code, LocalizedMessage>>;

/** Base of every feature's localized error, whatever its table. */
export class LocalizedError<Code extends string = string> extends CodedError<Code> {
  constructor(messages: LocalizedMessages<Code>, code: Code, options?: { cause?: unknown }) {
    super(code, messages[code].en, options);
  }
}

/**
 * The error class of one feature, bound to its table and named for logs:
 * `class AccessError extends localizedErrorClass('AccessError', ACCESS_MESSAGES) {}`.
 */
export function localizedErrorClass<Code extends string>(name: string, messages: LocalizedMessages<Code>) {
  return class extends LocalizedError<Code> {
    constructor(code: Code, options?: { cause?: unknown }) {
      super(messages, code, options);
      this.name = name;
    }
  };
}

// The queue envelope: stored in the outbox row and sent verbatim as the message body. It carries the
// run id (the same id as the run row and the outbox row) and everything a worker needs to find the
// unit and the run without a lookup.
import { z } from 'zod';
import { CodedError } from '../../../errors/coded-error.ts';

/** Largest serialized payload a dispatch accepts (64 KiB); refused with PAYLOAD_TOO_LARGE above it. */
export const MAX_PAYLOAD_BYTES = 65_536;

export const envelopeSchema = z.object({
  run_id: z.uuid(),
  /** task: a command for exactly one unit; event: one subscriber's delivery of a domain event. */
  kind: z.enum(['task', 'event']),
  /** Unit name: the task, or the subscriber unit that handles this delivery. Equal to the run's name. */
  name: z.string().min(1).max(64),
  /** Event type (kind event only), e.g. identity.session_started. */
  event: z.string().min(1).max(128).optional(),
  /** Event version (kind event only). */
  version: z.number().int().positive().optional(),
  /** Present exactly for tenant runs (decimal string of tenants.id); absent for platform and system runs. */
  tenant_id: z.string().regex(/^[1-9][0-9]*$/).optional(),
  payload: z.unknown(),
  correlation_id: z.uuid(),
  causation_id: z.uuid(),
  /**
   * W3C trace context of the dispatch (src/observe/work-tracing.ts); absent when no trace was recorded
   * and in older messages. A malformed one is dropped, never a reason to refuse the message.
   */
  traceparent: z.string().regex(/^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/).optional().catch(undefined),
});

export type Envelope = z.infer<typeof envelopeSchema>;

export class EnvelopeInvalidError extends CodedError<'ENVELOPE_INVALID'> {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ENVELOPE_INVALID', message, options);
    this.name = 'EnvelopeInvalidError';
  }
}

/**
 * Parses a message body into an envelope; refuses anything else (the message is not ours). `json`: the
 * body already parsed as JSON (the consumer parses each body once), else the body is parsed here.
 */
export function parseEnvelope(body: string, json?: unknown): Envelope {
  if (json === undefined) {
    try {
      json = JSON.parse(body);
    } catch (cause) {
      throw new EnvelopeInvalidError('message body is not JSON: it was not written by the outbox relay', { cause });
    }
  }
  const parsed = envelopeSchema.safeParse(json);
  if (!parsed.success) {
    const fields = [...new Set(parsed.error.issues.map((i) => i.path.join('.') || '(body)'))].join(', ');
    throw new EnvelopeInvalidError(`message body is not a run envelope (bad fields: ${fields})`);
  }
  return parsed.data;
}

export function payloadBytes(payload: unknown): number {
  return Buffer.byteLength(JSON.stringify(payload ?? null), 'utf8');
}

/**
 * Characters escaped in a message body: those SQS refuses (it allows only #x9 | #xA | #xD |
 * #x20-#xD7FF | #xE000-#xFFFD | #x10000-#x10FFFF), which JSON.stringify writes literally (U+FFFE,
 * U+FFFF; it escapes the controls and lone surrogates itself, listed for a body built any other way),
 * and every surrogate, so a character above U+FFFF travels as two escapes: SQS-protocol servers that
 * test the body one UTF-16 unit at a time (fauxqs 2.4) refuse those characters otherwise.
 */
const ESCAPED_IN_BODY = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/g;

/**
 * The message body of an envelope: its JSON, with every character of ESCAPED_IN_BODY written as a
 * \uXXXX escape. Such a character can only stand inside a JSON string there, where the escape means the
 * same character, so the worker's JSON.parse gives back exactly the payload that was dispatched, and no
 * payload a dispatch accepted can make the queue refuse its message for ever.
 */
export function envelopeBody(envelope: unknown): string {
  const json = JSON.stringify(envelope);
  ESCAPED_IN_BODY.lastIndex = 0;
  if (!ESCAPED_IN_BODY.test(json)) return json;
  return json.replace(ESCAPED_IN_BODY, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

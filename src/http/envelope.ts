// The two body shapes of the API. Success: { success: true, data, meta }. Error: { success: false,
// error: { code, message, details? } }. Their JSON schemas are registered once and referenced by routes.

export interface SuccessEnvelope<T> {
  success: true;
  data: T;
  meta: Record<string, unknown>;
}

export interface ErrorEnvelope {
  success: false;
  error: { code: string; message: string; details?: Record<string, unknown> };
}

export function ok<T>(data: T, meta: Record<string, unknown> = {}): SuccessEnvelope<T> {
  return { success: true, data, meta };
}

export const ERROR_ENVELOPE_SCHEMA_ID = 'ErrorEnvelope';

export const errorEnvelopeSchema = {
  $id: ERROR_ENVELOPE_SCHEMA_ID,
  type: 'object',
  description: 'Every error: a stable code and a message in the language chosen by Accept-Language.',
  required: ['success', 'error'],
  properties: {
    success: { type: 'boolean', const: false },
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', description: 'Stable machine-readable code, e.g. UNAUTHENTICATED.' },
        message: { type: 'string', description: 'Human-readable message (English or Portuguese).' },
        details: { type: 'object', additionalProperties: true, description: 'Extra public facts, when a code has any.' },
      },
    },
  },
} as const;

/** `{ $ref }` to the error envelope, for route response schemas. */
export const errorRef = { $ref: `${ERROR_ENVELOPE_SCHEMA_ID}#` } as const;

/** JSON schema of a success envelope around `data`. */
export function successSchema(data: object, description: string) {
  return {
    type: 'object',
    description,
    required: ['success', 'data', 'meta'],
    properties: {
      success: { type: 'boolean', const: true },
      data,
      meta: { type: 'object', additionalProperties: true },
    },
  } as const;
}

// A unit's payload schema in two forms: the zod schema in the unit file (workers, typed dispatch) and
// its JSON Schema in tasks.json (`payloadSchema`), which the API's catalog dispatcher checks with ajv
// because the API never imports unit code. The JSON Schema describes the payload as a dispatcher sends
// it (zod's `input` side: before transforms and defaults). Refinements written as code (`refine`,
// `superRefine`) have no JSON Schema form and are dropped by zod: those still run in the worker, before
// the handler; types with no JSON form at all (Date, bigint, Map, custom...) are refused by tasks:check.
import { z, type ZodType } from 'zod';
import { CodedError } from '../../errors/coded-error.ts';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';

/** JSON Schema (draft 2020-12) of a payload, as emitted into tasks.json. */
export type PayloadJsonSchema = Record<string, unknown>;

/** One failing place of a payload: its path (dot-separated, '' for the payload itself) and the rule broken. */
export interface PayloadIssue {
  path: string;
  rule: string;
}

/** A payload check: the payload to write (possibly transformed) or the issues; never throws for bad input. */
export type PayloadCheck = (payload: unknown) => { ok: true; value: unknown } | { ok: false; issues: PayloadIssue[] };

/** A field of a payload schema with no JSON Schema form: its path (`a.b`, `list[]`, `map.*`, `pair[1]`) and zod's type name. */
export interface UnrepresentableField {
  path: string;
  type: string;
}

export class PayloadSchemaUnrepresentable extends CodedError<'PAYLOAD_SCHEMA_UNREPRESENTABLE'> {
  /** Every field without a JSON Schema form, in schema order; empty when the reason is not a field (a cycle...). */
  readonly fields: UnrepresentableField[];
  constructor(message: string, options?: { cause?: unknown; fields?: UnrepresentableField[] }) {
    super('PAYLOAD_SCHEMA_UNREPRESENTABLE', message, options);
    this.name = 'PayloadSchemaUnrepresentable';
    this.fields = options?.fields ?? [];
  }
}

const ADVICE = 'use JSON types only (strings, numbers, booleans, arrays, objects; dates as z.iso.datetime())';

// The payload path of a place in the emitted JSON Schema: property names as written, `[]` for every
// element of an array, `[n]` for a tuple's position, `*` for any key of a record; the branches of a
// union (anyOf...) are not part of the payload's path.
function payloadPathOf(jsonPath: readonly (string | number)[]): string {
  let path = '';
  for (let i = 0; i < jsonPath.length; i++) {
    const step = jsonPath[i];
    if (step === 'properties' || step === 'patternProperties') {
      const key = String(jsonPath[++i]);
      path += path === '' ? key : `.${key}`;
    } else if (step === 'items') path += '[]';
    else if (step === 'prefixItems') path += `[${String(jsonPath[++i])}]`;
    else if (step === 'additionalProperties' || step === 'propertyNames') path += path === '' ? '*' : '.*';
    else if (step === 'anyOf' || step === 'oneOf' || step === 'allOf') i++;
  }
  return path;
}

/**
 * The JSON Schema of a zod payload schema; throws PayloadSchemaUnrepresentable naming every field that
 * has no JSON Schema form (with its path), so tasks:check reports them all in one pass.
 */
export function payloadJsonSchema(schema: ZodType): PayloadJsonSchema {
  const fields: UnrepresentableField[] = [];
  let emitted: PayloadJsonSchema;
  try {
    emitted = z.toJSONSchema(schema, {
      io: 'input',
      target: 'draft-2020-12',
      unrepresentable: (ctx) => {
        fields.push({ path: payloadPathOf(ctx.path), type: ctx.message.replace(/ cannot be represented in JSON Schema$/, '') });
        return 'any';
      },
    });
  } catch (cause) {
    throw new PayloadSchemaUnrepresentable(`payload schema cannot be expressed as JSON Schema (${(cause as Error).message}): ${ADVICE}`, { cause, fields });
  }
  if (fields.length > 0) {
    const named = fields.map((f) => `${f.path || '(payload)'} (${f.type})`).join(', ');
    throw new PayloadSchemaUnrepresentable(`payload schema cannot be expressed as JSON Schema: ${fields.length === 1 ? 'field' : 'fields'} ${named}: ${ADVICE}`, { fields });
  }
  return emitted;
}

/** A zod check, as the workers and typed dispatch run it. */
export function zodPayloadCheck(schema: ZodType): PayloadCheck {
  return (payload) => {
    const parsed = schema.safeParse(payload);
    if (parsed.success) return { ok: true, value: parsed.data };
    return { ok: false, issues: parsed.error.issues.map((i) => ({ path: i.path.join('.'), rule: i.message })) };
  };
}

// Formats are not validated by ajv: zod emits a `pattern` beside every string format it knows, and that
// pattern is the rule the worker applies too. `strict: false` tolerates zod's extra keywords.
const ajv = new Ajv2020({ allErrors: true, strict: false, validateFormats: false });

function issueOf(e: ErrorObject): PayloadIssue {
  const base = e.instancePath.split('/').slice(1).map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
  const missing = e.keyword === 'required' ? (e.params as { missingProperty?: string }).missingProperty : undefined;
  const extra = e.keyword === 'additionalProperties' ? (e.params as { additionalProperty?: string }).additionalProperty : undefined;
  const path = [...base, ...(missing ? [missing] : []), ...(extra ? [extra] : [])].join('.');
  // A pattern's text is long and says little to a caller; the keyword and the schema path say where to look.
  const rule =
    e.keyword === 'pattern'
      ? 'must match the pattern of its schema'
      : missing
        ? 'is required'
        : extra
          ? 'is not allowed'
          : (e.message ?? e.keyword);
  return { path, rule };
}

/** Compiles a payloadSchema from tasks.json once; the returned check is what the catalog dispatcher runs. */
export function compilePayloadSchema(schema: PayloadJsonSchema): PayloadCheck {
  const { $schema: _ignored, ...body } = schema;
  const validate: ValidateFunction = ajv.compile(body);
  return (payload) => {
    if (validate(payload ?? null)) return { ok: true, value: payload ?? null };
    const issues = (validate.errors ?? []).map(issueOf);
    return { ok: false, issues: issues.length > 0 ? issues : [{ path: '', rule: 'does not match its schema' }] };
  };
}

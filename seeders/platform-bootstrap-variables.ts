// The PLATFORM_BOOTSTRAP_* variables, read only when the database has no platform grant at all.
// A missing or invalid variable fails the deploy naming the variable and its rule; values are never
// echoed (the password is a deploy secret; the others are kept out of messages too).
import { z } from 'zod';
import { SeederError } from './seeder-error.ts';

export const BOOTSTRAP_VARIABLES = [
  'PLATFORM_BOOTSTRAP_USERNAME',
  'PLATFORM_BOOTSTRAP_PASSWORD',
  'PLATFORM_BOOTSTRAP_EMAIL',
  'PLATFORM_BOOTSTRAP_NAME',
] as const;

export const USERNAME_PATTERN = /^[a-zA-Z0-9_.-]{1,64}$/;
export const PASSWORD_MAX_BYTES = 1024;
export const NAME_MAX_LENGTH = 200;

const required = {
  error: (issue: { input: unknown }) =>
    issue.input === undefined ? 'required on the first deploy (the database has no platform operator yet)' : 'must be text',
};

const schema = z.object({
  PLATFORM_BOOTSTRAP_USERNAME: z
    .string(required)
    .regex(USERNAME_PATTERN, { error: 'must be 1 to 64 characters from [a-zA-Z0-9_.-]' }),
  PLATFORM_BOOTSTRAP_PASSWORD: z
    .string(required)
    .refine((s) => s.isWellFormed(), { error: 'must be valid UTF-8 text' })
    .refine((s) => Buffer.byteLength(s, 'utf8') >= 1 && Buffer.byteLength(s, 'utf8') <= PASSWORD_MAX_BYTES, {
      error: `must be 1 to ${PASSWORD_MAX_BYTES} bytes of UTF-8`,
    }),
  PLATFORM_BOOTSTRAP_EMAIL: z
    .string(required)
    .max(254, { error: 'must be at most 254 characters' })
    .pipe(z.email({ error: 'must be an e-mail address (the destination of the accepted platform invitation)' })),
  PLATFORM_BOOTSTRAP_NAME: z
    .string()
    .refine((s) => s.trim().length > 0 && s.length <= NAME_MAX_LENGTH, {
      error: `must be 1 to ${NAME_MAX_LENGTH} characters when set`,
    })
    .optional(),
});

export interface BootstrapVariables {
  username: string;
  password: string;
  email: string;
  /** Display name; the username when PLATFORM_BOOTSTRAP_NAME is unset. */
  name: string;
}

/** Validates the bootstrap variables; throws PLATFORM_BOOTSTRAP_INVALID naming each bad variable. */
export function readBootstrapVariables(env: Record<string, string | undefined>): BootstrapVariables {
  // An empty value counts as unset, as shells and compose files export `VAR=`.
  const picked = Object.fromEntries(
    BOOTSTRAP_VARIABLES.map((v) => [v, env[v] === '' ? undefined : env[v]]).filter(([, value]) => value !== undefined),
  );
  const result = schema.safeParse(picked);
  if (!result.success) {
    const lines = result.error.issues.map((issue) => `  ${String(issue.path[0] ?? '(environment)')}: ${issue.message}`);
    throw new SeederError(
      'PLATFORM_BOOTSTRAP_INVALID',
      `cannot create the first platform operator; set these variables and deploy again:\n${lines.join('\n')}`,
    );
  }
  const v = result.data;
  return {
    username: v.PLATFORM_BOOTSTRAP_USERNAME,
    password: v.PLATFORM_BOOTSTRAP_PASSWORD,
    email: v.PLATFORM_BOOTSTRAP_EMAIL.trim(),
    name: v.PLATFORM_BOOTSTRAP_NAME?.trim() ?? v.PLATFORM_BOOTSTRAP_USERNAME,
  };
}

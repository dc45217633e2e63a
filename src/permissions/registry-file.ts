// permissions.json: writing it (the build's emit) and reading it back (the PermissionsSeeder in the
// migrator image, which receives it from the same build through SVC_PERMISSIONS_REGISTRY).
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { PERMISSION_CODE_PATTERN, USE_CASE_PATTERN, buildRegistry, type PermissionRegistry } from './registry.ts';
import { PERMISSION_SCOPES } from './scope-ceiling.ts';

export const PERMISSIONS_FILE_NAME = 'permissions.json';

const registryFileSchema = z.object({
  version: z.literal(1),
  permissions: z.array(
    z.object({
      code: z.string().regex(PERMISSION_CODE_PATTERN),
      scope: z.enum(PERMISSION_SCOPES),
      description: z.string().min(1),
      replaces_code: z.string().regex(PERMISSION_CODE_PATTERN).nullable(),
      use_cases: z.array(z.string().regex(USE_CASE_PATTERN)).min(1),
    }),
  ),
});

export class RegistryFileError extends Error {
  readonly code = 'PERMISSION_REGISTRY_FILE_INVALID';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'RegistryFileError';
  }
}

export function serializeRegistry(registry: PermissionRegistry): string {
  return `${JSON.stringify(registry, null, 2)}\n`;
}

/** Validates the declarations and writes `<dir>/permissions.json`; returns the file path. */
export function emitRegistry(dir: string, registry: PermissionRegistry = buildRegistry()): string {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, PERMISSIONS_FILE_NAME);
  // Write then rename, so a reader never sees half a file.
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, serializeRegistry(registry));
  fs.renameSync(tmp, file);
  return file;
}

/** Reads and validates an emitted permissions.json. */
export function readRegistryFile(file: string): PermissionRegistry {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (cause) {
    throw new RegistryFileError(
      `cannot read the permission registry ${file} (SVC_PERMISSIONS_REGISTRY): ${(cause as Error).message}; run \`npm run permissions:emit\` or fix the path`,
      { cause },
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (cause) {
    throw new RegistryFileError(`the permission registry ${file} is not JSON; emit it again with \`npm run permissions:emit\``, {
      cause,
    });
  }
  const parsed = registryFileSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new RegistryFileError(
      `the permission registry ${file} is invalid at ${issue.path.join('.') || '(root)'}: ${issue.message}; emit it again with \`npm run permissions:emit\``,
    );
  }
  const codes = new Set<string>();
  for (const p of parsed.data.permissions) {
    if (codes.has(p.code)) throw new RegistryFileError(`the permission registry ${file} lists ${p.code} twice`);
    codes.add(p.code);
  }
  return parsed.data;
}

/**
 * The registry the PermissionsSeeder projects: the emitted file named by SVC_PERMISSIONS_REGISTRY when
 * set (the migrator image), otherwise built in-process from the declarations (same content as
 * `permissions:emit` would write).
 */
export function loadRegistry(env: { SVC_PERMISSIONS_REGISTRY?: string }, root: string): {
  registry: PermissionRegistry;
  origin: string;
} {
  const file = env.SVC_PERMISSIONS_REGISTRY;
  if (file) {
    const resolved = path.resolve(root, file);
    return { registry: readRegistryFile(resolved), origin: resolved };
  }
  return { registry: buildRegistry(), origin: 'the declarations of this build' };
}

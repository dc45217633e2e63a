// `svc permissions emit [--out <dir>]`: validates the permission declarations and writes
// dist/permissions.json (never committed). An invalid registry exits 1 naming each offending
// declaration, which fails `npm run build` and the image build.
import path from 'node:path';
import { PermissionRegistryError, buildRegistry } from '../permissions/registry.ts';
import { emitRegistry } from '../permissions/registry-file.ts';

const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');
const USAGE = 'usage: svc permissions emit [--out <dir>]   write <dir>/permissions.json (default dist/)';

export async function run(args: string[]): Promise<number> {
  const [command, ...rest] = args;
  let outDir = path.join(PROJECT_ROOT, 'dist');
  if (command !== 'emit') {
    console.error(USAGE);
    return 2;
  }
  for (let i = 0; i < rest.length; i++) {
    if (rest[i] === '--out' && rest[i + 1]) outDir = path.resolve(rest[++i]!);
    else {
      console.error(USAGE);
      return 2;
    }
  }
  let registry;
  try {
    registry = buildRegistry();
  } catch (error) {
    if (error instanceof PermissionRegistryError) {
      console.error(`svc: ${error.code}: ${error.message}`);
      return 1;
    }
    throw error;
  }
  const file = emitRegistry(outDir, registry);
  console.log(`emit: ${path.relative(process.cwd(), file) || file} (${registry.permissions.length} permissions)`);
  return 0;
}

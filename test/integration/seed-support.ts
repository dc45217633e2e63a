// Shared by the seed tests: run the real `svc` CLI against a test database, and take content
// snapshots of the seeded tables to prove a rerun changed nothing.
import path from 'node:path';
import type { Sql } from '../../src/db/client.ts';
import { runNodeProcess, type NodeProcessResult } from '../support/node-process.ts';

export const PROJECT_ROOT = path.resolve(import.meta.dirname, '..', '..');

export type CliResult = Omit<NodeProcessResult, 'timedOut'>;

/** Runs `svc <args>` on Node 26 with ONLY the given variables (plus PATH/HOME), capturing all output. */
export async function svc(args: string[], env: Record<string, string | undefined>): Promise<CliResult> {
  const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp' };
  for (const [k, v] of Object.entries(env)) if (v !== undefined) childEnv[k] = v;
  const { code, stdout, stderr } = await runNodeProcess([path.join(PROJECT_ROOT, 'src/main/cli.ts'), ...args], { cwd: PROJECT_ROOT, env: childEnv });
  return { code, stdout, stderr };
}

export const SEEDED_TABLES = [
  'financial_institutions',
  'product_groups',
  'operation_types',
  'products',
  'product_operation_types',
  'offers',
  'permissions',
  'permission_use_cases',
  'parties',
  'person_profiles',
  'company_profiles',
  'users',
  'platform_logins',
  'user_logins',
  'credentials',
  'credential_versions',
  'user_credentials',
  'platform_access_profiles',
  'platform_access_profile_permissions',
  'platform_invitations',
  'platform_grants',
  'platform_tenant_blueprints',
  'platform_access_profile_templates',
  'platform_access_profile_template_permissions',
  'tenants',
  'tenant_accounts',
  'brokers',
  'tenant_brokers',
  'tenant_broker_accounts',
  'access_profiles',
  'access_profile_permissions',
  'access_profile_templates',
  'access_profile_template_permissions',
  'memberships',
  'membership_brokers',
  'membership_access_profiles',
] as const;

/** Row count and a digest of every row's full content (timestamps included) per seeded table. */
export async function snapshot(sql: Sql): Promise<Record<string, { rows: number; digest: string }>> {
  const out: Record<string, { rows: number; digest: string }> = {};
  for (const table of SEEDED_TABLES) {
    const [row] = await sql.unsafe(
      `SELECT count(*)::int AS rows, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS digest FROM ${table} t`,
    );
    out[table] = { rows: row!.rows as number, digest: row!.digest as string };
  }
  return out;
}

export function bootstrapEnv(overrides: Record<string, string | undefined> = {}): Record<string, string | undefined> {
  return {
    PLATFORM_BOOTSTRAP_USERNAME: 'root.operator',
    PLATFORM_BOOTSTRAP_PASSWORD: 'correct horse battery staple ✓ 42',
    PLATFORM_BOOTSTRAP_EMAIL: 'Ops@Example.com',
    NODE_ENV: 'production',
    ...overrides,
  };
}

// DevSeeder (`npm run db:seed -- --class DevSeeder`): sample data for development. Creates a tenant
// from its blueprint (which holds one tenant-scope platform template, copied into the tenant by
// createTenantFromBlueprint), a tenant account, a broker working under it, a tenant profile and a broker
// profile, and two members (a tenant administrator and a broker member) with e-mail logins. Tax ids
// are syntactically valid (check digits right) but derived from arbitrary bases: they identify nobody.
// Refused when NODE_ENV=production. Idempotent: every row is looked up by a natural key first, so a
// rerun creates nothing. Like every look-up-then-insert seeder it assumes one migrator at a time.
// Run `migrator deploy` (or db-seed) first so the permissions exist; missing ones are skipped.
import type { TxSql } from '../src/db/client.ts';
import type { SeedContext, Seeder } from '../src/migrator/seed-runner.ts';
import { TASK_RUNS_READ } from '../src/permissions/declarations/access.ts';
import { createTenantFromBlueprint } from '../src/tenancy/create-tenant-from-blueprint.ts';
import { SeederError } from './seeder-error.ts';
import { cnpjFromBase, cpfFromBase } from './tax-ids.ts';

export const DEV_TENANT_UID = 'dev-tenant';
export const DEV_BROKER_UID = 'dev-broker';
const BLUEPRINT_NAME = 'Development blueprint';
const TENANT_PROFILE = 'Tenant administrator';
const TENANT_TEMPLATE = 'Tenant administrator';
const BROKER_PROFILE = 'Broker member';

/** Sample tax ids: fixed bases, computed check digits. */
export const DEV_TAX_IDS = {
  tenantCompany: cnpjFromBase('900000010001'),
  brokerCompany: cnpjFromBase('900000020001'),
  admin: cpfFromBase('900000001'),
  member: cpfFromBase('900000002'),
} as const;

type Id = string;

function found(rows: readonly Record<string, unknown>[]): Id | undefined {
  return rows[0] ? String(rows[0].id) : undefined;
}

async function companyParty(tx: TxSql, taxId: string, legalName: string, created: string[]): Promise<Id> {
  const existing = found(await tx`SELECT party_id AS id FROM company_profiles WHERE tax_id = ${taxId}`);
  if (existing) return existing;
  const [party] = await tx`INSERT INTO parties (kind, display_name) VALUES ('company', ${legalName}) RETURNING id`;
  await tx`INSERT INTO company_profiles (party_id, legal_name, tax_id) VALUES (${party!.id}, ${legalName}, ${taxId})`;
  created.push(`company ${legalName}`);
  return String(party!.id);
}

async function personUser(tx: TxSql, taxId: string, fullName: string, created: string[]): Promise<Id> {
  const existing = found(await tx`
    SELECT u.id FROM person_profiles pp JOIN users u ON u.party_id = pp.party_id WHERE pp.tax_id = ${taxId}`);
  if (existing) return existing;
  const [party] = await tx`INSERT INTO parties (kind, display_name) VALUES ('person', ${fullName}) RETURNING id`;
  await tx`INSERT INTO person_profiles (party_id, full_name, tax_id) VALUES (${party!.id}, ${fullName}, ${taxId})`;
  const [user] = await tx`INSERT INTO users (party_id) VALUES (${party!.id}) RETURNING id`;
  created.push(`user ${fullName}`);
  return String(user!.id);
}

async function member(
  tx: TxSql,
  tenantId: Id,
  userId: Id,
  uid: string,
  email: string,
  created: string[],
): Promise<Id> {
  let membershipId = found(await tx`SELECT id FROM memberships WHERE uid = ${uid}`);
  if (!membershipId) {
    const [m] = await tx`INSERT INTO memberships (uid, tenant_id, user_id) VALUES (${uid}, ${tenantId}, ${userId}) RETURNING id`;
    membershipId = String(m!.id);
    created.push(`membership ${uid}`);
  }
  const login = found(await tx`
    SELECT id FROM user_logins
     WHERE tenant_id = ${tenantId} AND kind = 'email' AND value_normalized = ${email} AND removed_at IS NULL`);
  if (!login) {
    await tx`INSERT INTO user_logins (user_id, tenant_id, kind, value, value_normalized)
             VALUES (${userId}, ${tenantId}, 'email', ${email}, ${email})`;
    created.push(`login ${email}`);
  }
  return membershipId;
}

async function holdProfile(
  tx: TxSql,
  tenantId: Id,
  membershipId: Id,
  profileId: Id,
  brokerId: Id | null,
  created: string[],
): Promise<void> {
  const open = found(await tx`
    SELECT id FROM membership_access_profiles
     WHERE membership_id = ${membershipId} AND access_profile_id = ${profileId} AND valid_until IS NULL`);
  if (open) return;
  await tx`INSERT INTO membership_access_profiles (tenant_id, membership_id, broker_id, access_profile_id, valid_from)
           VALUES (${tenantId}, ${membershipId}, ${brokerId}, ${profileId}, current_date)`;
  created.push(`profile link of membership ${membershipId}`);
}

async function profile(tx: TxSql, tenantId: Id, brokerId: Id | null, name: string, created: string[]): Promise<Id> {
  const existing = found(await tx`
    SELECT id FROM access_profiles WHERE tenant_id = ${tenantId} AND broker_id IS NOT DISTINCT FROM ${brokerId} AND name = ${name}`);
  if (existing) return existing;
  const [row] = await tx`INSERT INTO access_profiles (tenant_id, broker_id, name) VALUES (${tenantId}, ${brokerId}, ${name}) RETURNING id`;
  created.push(`access profile ${name}`);
  return String(row!.id);
}

/**
 * The development blueprint with one tenant-scope platform template, so the tenant created from it
 * shows a copied template (holding access.task_runs.read once the PermissionsSeeder has declared it).
 */
async function blueprint(tx: TxSql, created: string[]): Promise<Id> {
  await tx`INSERT INTO platform_tenant_blueprints (name, description)
           VALUES (${BLUEPRINT_NAME}, 'Sample blueprint created by DevSeeder') ON CONFLICT (name) DO NOTHING`;
  const [row] = await tx`SELECT id FROM platform_tenant_blueprints WHERE name = ${BLUEPRINT_NAME}`;
  const blueprintId = String(row!.id);
  let templateId = found(await tx`
    SELECT id FROM platform_access_profile_templates WHERE blueprint_id = ${blueprintId} AND name = ${TENANT_TEMPLATE}`);
  if (!templateId) {
    const [t] = await tx`
      INSERT INTO platform_access_profile_templates (blueprint_id, scope, name, description, auto_assign)
      VALUES (${blueprintId}, 'tenant', ${TENANT_TEMPLATE}, 'Sample template created by DevSeeder', 'tenant_admin')
      RETURNING id`;
    templateId = String(t!.id);
    created.push(`platform template ${TENANT_TEMPLATE}`);
  }
  const granted = await tx`
    INSERT INTO platform_access_profile_template_permissions (template_id, permission_id)
    SELECT ${templateId}, id FROM permissions WHERE code = ${TASK_RUNS_READ}
    ON CONFLICT DO NOTHING RETURNING permission_id`;
  if (granted.length) created.push(`permission ${TASK_RUNS_READ} on platform template ${TENANT_TEMPLATE}`);
  return blueprintId;
}

export const DevSeeder: Seeder = {
  name: 'DevSeeder',
  async run(tx: TxSql, ctx: SeedContext): Promise<void> {
    if (ctx.env.NODE_ENV === 'production') {
      throw new SeederError(
        'DEV_SEEDER_REFUSED',
        'DevSeeder creates sample data and is refused with NODE_ENV=production; run it only in development.',
      );
    }
    const created: string[] = [];

    const blueprintId = await blueprint(tx, created);
    let tenantId = found(await tx`SELECT id FROM tenants WHERE uid = ${DEV_TENANT_UID}`);
    if (!tenantId) {
      // The same use case a platform operator goes through: the blueprint's templates are copied in.
      const tenant = await createTenantFromBlueprint(tx, { blueprintId, name: 'Demo Promotora', uid: DEV_TENANT_UID });
      tenantId = tenant.tenantId;
      created.push(`tenant ${DEV_TENANT_UID} with ${tenant.templates.length} access-profile template(s)`);
    }

    const tenantCompany = await companyParty(tx, DEV_TAX_IDS.tenantCompany, 'Demo Promotora de Crédito Ltda', created);
    await tx`INSERT INTO tenant_accounts (tenant_id, company_party_id) VALUES (${tenantId}, ${tenantCompany})
             ON CONFLICT (tenant_id, company_party_id) DO NOTHING`;
    const [account] = await tx`SELECT id FROM tenant_accounts WHERE tenant_id = ${tenantId} AND company_party_id = ${tenantCompany}`;

    const brokerParty = await companyParty(tx, DEV_TAX_IDS.brokerCompany, 'Demo Correspondente Bancário Ltda', created);
    let brokerId = found(await tx`SELECT id FROM brokers WHERE uid = ${DEV_BROKER_UID}`);
    if (!brokerId) {
      const [b] = await tx`INSERT INTO brokers (uid, party_id) VALUES (${DEV_BROKER_UID}, ${brokerParty}) RETURNING id`;
      brokerId = String(b!.id);
      created.push(`broker ${DEV_BROKER_UID}`);
    }
    await tx`INSERT INTO tenant_brokers (tenant_id, broker_id, broker_code) VALUES (${tenantId}, ${brokerId}, 'DEV001')
             ON CONFLICT (tenant_id, broker_id) DO NOTHING`;
    const signed = found(await tx`
      SELECT id FROM tenant_broker_accounts
       WHERE tenant_id = ${tenantId} AND broker_id = ${brokerId} AND tenant_account_id = ${account!.id} AND valid_until IS NULL`);
    if (!signed) {
      await tx`INSERT INTO tenant_broker_accounts (tenant_id, broker_id, tenant_account_id, valid_from)
               VALUES (${tenantId}, ${brokerId}, ${account!.id}, current_date)`;
      created.push('broker account link');
    }

    const tenantProfile = await profile(tx, tenantId, null, TENANT_PROFILE, created);
    const brokerProfile = await profile(tx, tenantId, brokerId, BROKER_PROFILE, created);
    // Tenant-scope permissions fit the tenant profile; the ceiling would refuse them on the broker one.
    const granted = await tx`
      INSERT INTO access_profile_permissions (access_profile_id, permission_id)
      SELECT ${tenantProfile}, id FROM permissions WHERE code = ${TASK_RUNS_READ}
      ON CONFLICT DO NOTHING RETURNING permission_id`;
    if (granted.length) created.push(`permission ${TASK_RUNS_READ} on ${TENANT_PROFILE}`);

    const adminUser = await personUser(tx, DEV_TAX_IDS.admin, 'Ana Administradora', created);
    const adminMembership = await member(tx, tenantId, adminUser, 'dev-member-admin', 'ana.admin@dev.example.com', created);
    await holdProfile(tx, tenantId, adminMembership, tenantProfile, null, created);

    const memberUser = await personUser(tx, DEV_TAX_IDS.member, 'Bruno Corretor', created);
    const brokerMembership = await member(tx, tenantId, memberUser, 'dev-member-broker', 'bruno.corretor@dev.example.com', created);
    const link = found(await tx`
      SELECT id FROM membership_brokers WHERE membership_id = ${brokerMembership} AND broker_id = ${brokerId} AND valid_until IS NULL`);
    if (!link) {
      await tx`INSERT INTO membership_brokers (tenant_id, membership_id, user_id, broker_id, role, valid_from)
               VALUES (${tenantId}, ${brokerMembership}, ${memberUser}, ${brokerId}, 'member', current_date)`;
      created.push('broker link of the member');
    }
    await holdProfile(tx, tenantId, brokerMembership, brokerProfile, brokerId, created);

    ctx.log(created.length ? `dev data: created ${created.join(', ')}` : 'dev data: already present, nothing created');
    // Printed on every run (npm start runs this seeder): the tenant to dispatch for and to log in to.
    ctx.log(`development tenant: uid ${DEV_TENANT_UID} (id ${tenantId})`);
  },
};

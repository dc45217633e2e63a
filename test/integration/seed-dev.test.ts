// DevSeeder through `svc migrator db-seed --class DevSeeder`: sample data in development, idempotent,
// refused in production; plus the CatalogSeeder's validation and merge of a changed catalog.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCatalog } from '../../seeders/catalog-files.ts';
import { cnpjFromBase, cpfFromBase, isValidCnpj, isValidCpf } from '../../seeders/tax-ids.ts';
import { emptyDatabase, type TestDatabase } from '../support/services.ts';
import { PROJECT_ROOT, bootstrapEnv, snapshot, svc } from './seed-support.ts';

describe('DevSeeder', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await emptyDatabase();
    const deployed = await svc(['migrator', 'deploy'], { DATABASE_URL: db.url, ...bootstrapEnv() });
    expect(deployed.stderr).toBe('');
  });
  afterAll(async () => {
    await db?.drop();
  });
  const devSeed = (NODE_ENV: string) => svc(['migrator', 'db-seed', '--class', 'DevSeeder'], { DATABASE_URL: db.url, NODE_ENV });

  it('R-SEED-17 is refused with NODE_ENV=production and creates nothing', async () => {
    const before = await snapshot(db.sql);
    const result = await devSeed('production');
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('DEV_SEEDER_REFUSED');
    expect(await snapshot(db.sql)).toEqual(before);
  });

  it('R-SEED-16 creates a tenant, account, broker, profiles and members with valid but synthetic tax ids', async () => {
    const result = await devSeed('development');
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).not.toContain('seeding CatalogSeeder'); // only the named seeder ran
    const sql = db.sql;
    const [tenant] = await sql`SELECT id FROM tenants WHERE uid = 'dev-tenant'`;
    expect(tenant).toBeDefined();
    const [counts] = await sql`SELECT
      (SELECT count(*)::int FROM tenant_accounts WHERE tenant_id = ${tenant!.id}) AS accounts,
      (SELECT count(*)::int FROM tenant_brokers WHERE tenant_id = ${tenant!.id}) AS brokers,
      (SELECT count(*)::int FROM access_profiles WHERE tenant_id = ${tenant!.id} AND scope = 'tenant') AS tenant_profiles,
      (SELECT count(*)::int FROM access_profiles WHERE tenant_id = ${tenant!.id} AND scope = 'broker') AS broker_profiles,
      (SELECT count(*)::int FROM memberships WHERE tenant_id = ${tenant!.id}) AS members,
      (SELECT count(*)::int FROM membership_brokers WHERE tenant_id = ${tenant!.id}) AS broker_links,
      (SELECT count(*)::int FROM membership_access_profiles WHERE tenant_id = ${tenant!.id}) AS profile_links`;
    expect(counts).toEqual({ accounts: 1, brokers: 1, tenant_profiles: 1, broker_profiles: 1, members: 2, broker_links: 1, profile_links: 2 });
    const held = await sql`SELECT p.code FROM access_profile_permissions l JOIN permissions p ON p.id = l.permission_id
                           JOIN access_profiles a ON a.id = l.access_profile_id WHERE a.tenant_id = ${tenant!.id}`;
    expect(held.map((h) => h.code)).toEqual(['access.task_runs.read']);
    // The tenant was created from the development blueprint: its one platform template was copied in.
    const templates = await sql`
      SELECT t.scope, t.name, t.version, t.source_platform_template_id::text AS source, pt.blueprint_id::text AS blueprint,
             array(SELECT p.code FROM access_profile_template_permissions l JOIN permissions p ON p.id = l.permission_id
                    WHERE l.template_id = t.id ORDER BY p.code) AS codes
        FROM access_profile_templates t JOIN platform_access_profile_templates pt ON pt.id = t.source_platform_template_id
       WHERE t.tenant_id = ${tenant!.id}`;
    const [blueprint] = await sql`SELECT b.id::text AS id FROM platform_tenant_blueprints b JOIN tenants t ON t.blueprint_id = b.id
                                   WHERE t.id = ${tenant!.id}`;
    expect(templates).toEqual([
      { scope: 'tenant', name: 'Tenant administrator', version: 1, source: expect.any(String), blueprint: blueprint!.id, codes: ['access.task_runs.read'] },
    ]);
    const cpfs = await sql`SELECT tax_id FROM person_profiles WHERE tax_id IS NOT NULL`;
    const cnpjs = await sql`SELECT tax_id FROM company_profiles`;
    expect(cpfs.length).toBe(2);
    expect(cnpjs.length).toBe(2);
    for (const r of cpfs) expect(isValidCpf(r.tax_id as string), r.tax_id as string).toBe(true);
    for (const r of cnpjs) expect(isValidCnpj(r.tax_id as string), r.tax_id as string).toBe(true);
  });

  it('R-SEED-16 a rerun creates nothing (idempotent)', async () => {
    const before = await snapshot(db.sql);
    const result = await devSeed('development');
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('dev data: already present, nothing created');
    expect(await snapshot(db.sql)).toEqual(before);
  });

  it('R-SEED-16 tax id check digits are computed right (known valid examples)', () => {
    expect(cpfFromBase('529982247')).toBe('52998224725');
    expect(cnpjFromBase('112223330001')).toBe('11222333000181');
    expect(isValidCpf('52998224724')).toBe(false);
    expect(isValidCpf('11111111111')).toBe(false);
    expect(isValidCnpj('11222333000182')).toBe(false);
  });
});

describe('CatalogSeeder validation and merge', () => {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-catalog-'));
  let db: TestDatabase;
  let root: string;

  /** A migrations root like the project's, with its own copy of catalog/ the test may edit. */
  function fixtureRoot(): string {
    const dir = path.join(tmp, 'root');
    fs.mkdirSync(dir, { recursive: true });
    for (const entry of ['drizzle', 'sql', 'seeders']) fs.symlinkSync(path.join(PROJECT_ROOT, entry), path.join(dir, entry));
    fs.cpSync(path.join(PROJECT_ROOT, 'catalog'), path.join(dir, 'catalog'), { recursive: true });
    return dir;
  }
  const run = (args: string[]) =>
    svc(args, { DATABASE_URL: db.url, ...bootstrapEnv(), SVC_MIGRATIONS_ROOT: root });
  const editJson = (file: string, edit: (rows: Array<Record<string, unknown>>) => void) => {
    const full = path.join(root, 'catalog', file);
    const rows = JSON.parse(fs.readFileSync(full, 'utf8')) as Array<Record<string, unknown>>;
    edit(rows);
    fs.writeFileSync(full, JSON.stringify(rows));
  };

  beforeAll(async () => {
    db = await emptyDatabase();
    root = fixtureRoot();
    expect((await run(['migrator', 'deploy'])).code).toBe(0);
  });
  afterAll(async () => {
    await db?.drop();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('R-SEED-18 two seed runs at once are serialized by the migrator lock: no duplicate is created', async () => {
    const devSeed = () =>
      svc(['migrator', 'db-seed', '--class', 'DevSeeder'], { DATABASE_URL: db.url, NODE_ENV: 'development', SVC_MIGRATIONS_ROOT: root });
    const [a, b] = await Promise.all([devSeed(), devSeed()]);
    expect([a.code, b.code]).toEqual([0, 0]);
    expect([a.stdout, b.stdout].filter((o) => o.includes('dev data: already present, nothing created'))).toHaveLength(1);
    const [counts] = await db.sql`SELECT (SELECT count(*)::int FROM tenants) AS tenants,
      (SELECT count(*)::int FROM memberships) AS memberships, (SELECT count(*)::int FROM access_profiles) AS profiles`;
    expect(counts).toEqual({ tenants: 1, memberships: 2, profiles: 2 });
  });

  it('R-SEED-02 the shipped catalog is valid and holds real COMPE codes', () => {
    const catalog = loadCatalog(PROJECT_ROOT);
    const codes = new Map(catalog.financialInstitutions.map((f) => [f.code, f.name]));
    expect(codes.get('001')).toBe('Banco do Brasil S.A.');
    expect(codes.get('104')).toBe('Caixa Econômica Federal');
    expect(codes.get('237')).toBe('Banco Bradesco S.A.');
    expect(codes.get('341')).toBe('Itaú Unibanco S.A.');
    expect(catalog.products.length).toBeGreaterThanOrEqual(3);
  });

  it('R-SEED-02 a file failing validation aborts the seed naming file, path and rule; nothing is written', async () => {
    editJson('products.json', (rows) => {
      rows[1]!.productGroup = 'Not A Code';
    });
    editJson('financial-institutions.json', (rows) => {
      rows.push({ code: '1', name: 'Short code bank' });
    });
    const before = await snapshot(db.sql);
    const result = await run(['migrator', 'db-seed']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('CATALOG_INVALID');
    expect(result.stderr).toContain('catalog/products.json [1].productGroup: must be a lowercase code');
    expect(result.stderr).toContain(
      `catalog/financial-institutions.json [8].code: must be the three-digit COMPE code, as a string (e.g. "001")`,
    );
    expect(await snapshot(db.sql)).toEqual(before);
  });

  it('R-SEED-02 a dangling reference between files is refused naming the file and path', async () => {
    fs.cpSync(path.join(PROJECT_ROOT, 'catalog'), path.join(root, 'catalog'), { recursive: true });
    editJson('offers.json', (rows) => {
      rows[0]!.operationType = 'saque'; // consignado_inss does not admit saque
    });
    const result = await run(['migrator', 'db-seed']);
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('catalog/offers.json [0].operationType: product consignado_inss does not admit operation type saque');
  });

  it('R-SEED-02 merge by natural key: a rerun with a renamed bank updates only that row', async () => {
    fs.cpSync(path.join(PROJECT_ROOT, 'catalog'), path.join(root, 'catalog'), { recursive: true });
    editJson('financial-institutions.json', (rows) => {
      rows.find((r) => r.code === '033')!.name = 'Banco Santander Brasil';
    });
    const [before] = await db.sql`SELECT id, updated_at FROM financial_institutions WHERE code = '033'`;
    const [other] = await db.sql`SELECT updated_at FROM financial_institutions WHERE code = '001'`;
    const counts = await db.sql`SELECT count(*)::int AS n FROM financial_institutions`;
    const result = await run(['migrator', 'db-seed']);
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('0 row(s) inserted, 1 updated');
    const [after] = await db.sql`SELECT id, name, updated_at FROM financial_institutions WHERE code = '033'`;
    expect(after!.id).toBe(before!.id);
    expect(after!.name).toBe('Banco Santander Brasil');
    expect(after!.updated_at).not.toEqual(before!.updated_at);
    const [otherAfter] = await db.sql`SELECT updated_at FROM financial_institutions WHERE code = '001'`;
    expect(otherAfter!.updated_at).toEqual(other!.updated_at);
    expect(await db.sql`SELECT count(*)::int AS n FROM financial_institutions`).toEqual(counts);
  });
});

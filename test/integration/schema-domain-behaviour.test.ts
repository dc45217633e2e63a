// Behaviour of the domain schema in a migrated database: identity ids, JSON object columns, the four
// EXCLUDE constraints, the partial unique indexes, same-tenant composite references, the generated
// scopes, the append-only triggers of this schema, and parity between the drizzle model and the database.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { generateDrizzleJson } from 'drizzle-kit/api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDatabase } from '../support/services.ts';
import { refusal } from '../support/refusal.ts';
import { buildWorld as buildSpecWorld, digest, inserter, person, uid, type Row } from './schema-spec-support.ts';
import * as parties from '../../src/db/schema/parties.ts';
import * as identity from '../../src/db/schema/identity.ts';
import * as tenants from '../../src/db/schema/tenants.ts';
import * as institutions from '../../src/db/schema/institutions.ts';
import * as credentials from '../../src/db/schema/credentials.ts';
import * as brokers from '../../src/db/schema/brokers.ts';
import * as authorization from '../../src/db/schema/authorization.ts';
import * as memberships from '../../src/db/schema/memberships.ts';
import * as teams from '../../src/db/schema/teams.ts';
import * as invitations from '../../src/db/schema/invitations.ts';
import * as bankUsers from '../../src/db/schema/bank-users.ts';

const DOMAIN_MODULES = {
  parties, identity, tenants, institutions, credentials, brokers, authorization, memberships, teams, invitations,
  'bank-users': bankUsers,
} as Record<string, Record<string, unknown>>;
const ROOT = path.resolve(import.meta.dirname, '..', '..');

let db: TestDatabase;
/** INSERT one row and return it (ids come back as strings). */
let ins: ReturnType<typeof inserter>;

/**
 * The rule tests' world (tenant 1 with brokers, memberships, teams, a store code and platform rows)
 * plus what these tests add: a second tenant sharing broker 1 and user 1, a third user, and profiles.
 */
const w: Row = {};

async function buildWorld(): Promise<void> {
  Object.assign(w, await buildSpecWorld(db.sql));
  w.p3 = await person(ins, 'Caio');
  w.u3 = (await ins('users', { party_id: w.p3 })).id;
  w.ta2 = (await ins('tenant_accounts', { tenant_id: w.t2, company_party_id: w.company })).id;
  await ins('tenant_financial_institutions', { tenant_id: w.t2, financial_institution_id: w.fi });
  w.fia2 = (await ins('financial_institution_accounts', {
    tenant_id: w.t2, tenant_account_id: w.ta2, financial_institution_id: w.fi, company_code: '0002',
  })).id;
  await ins('tenant_brokers', { tenant_id: w.t2, broker_id: w.b1 });
  w.m3 = (await ins('memberships', { uid: uid(), tenant_id: w.t2, user_id: w.u1 })).id;
  w.team3 = (await ins('teams', { uid: uid(), tenant_id: w.t2, name: 'Other' })).id;
  w.apBroker1 = (await ins('access_profiles', { tenant_id: w.t1, broker_id: w.b1, name: 'b1 staff' })).id;
  w.apBroker2 = (await ins('access_profiles', { tenant_id: w.t1, broker_id: w.b2, name: 'b2 staff' })).id;
  w.apOtherTenant = (await ins('access_profiles', { tenant_id: w.t2, name: 'admins' })).id;
}

/**
 * A fresh bank user at the institution (each needs its own financial-institution credential). For u1
 * (the user of the assignments) any open one is closed first: one open bank user per user and institution.
 */
async function bankUser(closedAt: string | null = null, user: string = w.u1): Promise<{ userBank: string; credential: string }> {
  if (user === w.u1 && closedAt === null) {
    await db.sql`UPDATE user_banks SET closed_at = clock_timestamp()
      WHERE user_id = ${user} AND financial_institution_id = ${w.fi} AND closed_at IS NULL`;
  }
  const credential = (await ins('credentials', { uid: uid(), kind: 'financial_institution' })).id;
  await ins('financial_institution_credentials', {
    credential_id: credential, financial_institution_id: w.fi, login: `login-${uid()}`,
  });
  const userBank = (await ins('user_banks', {
    user_id: user, financial_institution_id: w.fi, credential_id: credential, kind: 'operator', status: 'active',
    confirmed_at: '2024-01-01T00:00:00Z', closed_at: closedAt,
  })).id;
  return { userBank, credential };
}

function assignment(userBank: string, brokerId: string, link: string, validUntil: string | null, validFrom = '2024-01-01') {
  return ins('bank_user_assignments', {
    user_bank_id: userBank, user_id: w.u1, party_id: w.p1, financial_institution_id: w.fi, tenant_id: w.t1,
    broker_id: brokerId, valid_from: validFrom, valid_until: validUntil, store_code_id: w.sc1,
    origin_membership_broker_id: link,
  });
}

beforeAll(async () => {
  db = await freshDatabase({ max: 3 });
  ins = inserter(db.sql);
  await buildWorld();
});
afterAll(async () => {
  await db?.drop();
});

describe('identity ids and JSON objects', () => {
  it('R-DB-09 an INSERT supplying an identity id is refused', async () => {
    const e = await refusal(() => db.sql`INSERT INTO parties (id, kind, display_name) VALUES (999, 'person', 'x')`);
    expect(e.code).toBe('428C9');
    const ok = await db.sql`INSERT INTO parties (kind, display_name) VALUES ('person', 'y') RETURNING id`;
    expect(Number(ok[0]!.id)).toBeGreaterThan(0);
  });

  it('R-DB-08 R-AUTHZ-30 delivery event payloads are objects under 64000 bytes, default {}', async () => {
    const delivery = (await ins('platform_invitation_deliveries', {
      uid: uid(), platform_invitation_id: w.pinv, channel: 'email', destination_normalized: 'a@x.io',
      provider: 'ses', requested_by_process: 'bootstrap',
    })).id;
    const event = (key: string, payload?: unknown) =>
      ins('platform_invitation_delivery_events', {
        delivery_id: delivery, status: 'sent', occurred_at: '2024-01-01T00:00:00Z', dedup_key: key,
        ...(payload === undefined ? {} : { payload: db.sql.json(payload as never) }),
      });
    expect((await event('default')).payload).toEqual({});
    expect((await event('near-cap', { blob: 'x'.repeat(63_000) })).dedup_key).toBe('near-cap');
    for (const bad of [[1, 2], 'text', 42]) {
      expect((await refusal(() => event(`bad-${JSON.stringify(bad)}`, bad))).constraint_name).toBe(
        'platform_invitation_delivery_events_payload_check',
      );
    }
    const big = await refusal(() => event('big', { blob: 'x'.repeat(64_000) }));
    expect(big.constraint_name).toBe('platform_invitation_delivery_events_payload_check');
    // R-AUTHZ-31: a repeated webhook does not duplicate.
    expect((await refusal(() => event('default'))).constraint_name).toBe('platform_invitation_delivery_events_dedup_key');
  });

  it('R-DB-08 invitation delivery event payloads and permission_changes before/after hold objects only', async () => {
    const inv = (await ins('invitations', {
      uid: uid(), tenant_id: w.t1, channel: 'email', destination: 'z@x.io', destination_normalized: 'z@x.io',
      token_sha256: digest(), expires_at: '2099-01-01T00:00:00Z', created_by_user_id: w.u1,
    })).id;
    const delivery = (await ins('invitation_deliveries', {
      uid: uid(), tenant_id: w.t1, invitation_id: inv, channel: 'email', destination_normalized: 'z@x.io',
      provider: 'ses', requested_by_user_id: w.u1,
    })).id;
    const e = await refusal(() => ins('invitation_delivery_events', {
      tenant_id: w.t1, delivery_id: delivery, status: 'sent', occurred_at: '2024-01-01T00:00:00Z', dedup_key: 'k',
      payload: db.sql.json([1] as never),
    }));
    expect(e.constraint_name).toBe('invitation_delivery_events_payload_check');
    const change = (before: unknown) =>
      ins('permission_changes', {
        permission_code: 'a.b', change: 'added', before: before === null ? null : db.sql.json(before as never),
        commit_sha: 'abc', commit_author: 'dev', deployed_by: 'ci',
      });
    await change(null);
    await change({ scope: 'tenant' });
    expect((await refusal(() => change(['tenant']))).constraint_name).toBe('permission_changes_before_check');
  });
});

describe('EXCLUDE constraints (half-open [valid_from, valid_until) periods)', () => {
  /**
   * Each case's `neighbours` differ from `row` in exactly one equality column of the constraint, so an
   * EXCLUDE missing that column (or keyed on the period alone) would refuse them.
   */
  const cases: Array<{
    id: string; constraint: string; period: string; row: (from: string, until: string | null) => Promise<Row>;
    neighbours: Array<[string, (from: string, until: string | null) => Promise<Row>]>;
  }> = [
    {
      id: 'R-EXC-02 R-BRK-10',
      constraint: 'broker_store_codes_no_overlap',
      period: 'broker_store_codes_period_check',
      row: (from, until) => ins('broker_store_codes', {
        tenant_id: w.t1, broker_id: w.b1, financial_institution_id: w.fi, store_code_id: w.sc1, regime: 'standard',
        valid_from: from, valid_until: until, assigned_by_user_id: w.u1,
      }),
      neighbours: [
        ['another broker', (from, until) => ins('broker_store_codes', {
          tenant_id: w.t1, broker_id: w.b2, financial_institution_id: w.fi, store_code_id: w.sc1, regime: 'standard',
          valid_from: from, valid_until: until, assigned_by_user_id: w.u1,
        })],
        ['another institution', (from, until) => ins('broker_store_codes', {
          tenant_id: w.t1, broker_id: w.b1, financial_institution_id: w.fi2, store_code_id: w.scFi2, regime: 'indicado',
          valid_from: from, valid_until: until, assigned_by_user_id: w.u1,
        })],
        ['another tenant', (from, until) => ins('broker_store_codes', {
          tenant_id: w.t2, broker_id: w.b1, financial_institution_id: w.fi, store_code_id: w.scT2, regime: 'indicado',
          valid_from: from, valid_until: until, assigned_by_user_id: w.u1,
        })],
      ],
    },
    {
      id: 'R-EXC-03',
      constraint: 'membership_team_no_overlap',
      period: 'membership_teams_period_check',
      row: (from, until) => ins('membership_teams', {
        tenant_id: w.t1, team_id: w.team1, membership_id: w.m1, valid_from: from, valid_until: until,
      }),
      neighbours: [
        ['another team', (from, until) => ins('membership_teams', {
          tenant_id: w.t1, team_id: w.teamX, membership_id: w.m1, valid_from: from, valid_until: until,
        })],
        ['another membership', (from, until) => ins('membership_teams', {
          tenant_id: w.t1, team_id: w.team1, membership_id: w.m2, valid_from: from, valid_until: until,
        })],
      ],
    },
    {
      id: 'R-EXC-04',
      constraint: 'team_fi_service_no_overlap',
      period: 'team_financial_institution_accounts_period_check',
      row: (from, until) => ins('team_financial_institution_accounts', {
        tenant_id: w.t1, team_id: w.team1, financial_institution_account_id: w.fia1, valid_from: from, valid_until: until,
      }),
      neighbours: [
        ['another team', (from, until) => ins('team_financial_institution_accounts', {
          tenant_id: w.t1, team_id: w.teamX, financial_institution_account_id: w.fia1, valid_from: from, valid_until: until,
        })],
        ['another institution account', (from, until) => ins('team_financial_institution_accounts', {
          tenant_id: w.t1, team_id: w.team1, financial_institution_account_id: w.fia3, valid_from: from, valid_until: until,
        })],
      ],
    },
    {
      id: 'R-EXC-05',
      constraint: 'team_hierarchy_edge_no_overlap',
      period: 'team_hierarchies_period_check',
      row: (from, until) => ins('team_hierarchies', {
        tenant_id: w.t1, subordinate_team_id: w.team2, superior_team_id: w.team1, valid_from: from, valid_until: until,
      }),
      neighbours: [
        ['another subordinate', (from, until) => ins('team_hierarchies', {
          tenant_id: w.t1, subordinate_team_id: w.teamX, superior_team_id: w.team1, valid_from: from, valid_until: until,
        })],
        ['another superior', (from, until) => ins('team_hierarchies', {
          tenant_id: w.t1, subordinate_team_id: w.team2, superior_team_id: w.teamX, valid_from: from, valid_until: until,
        })],
      ],
    },
  ];

  beforeAll(async () => {
    // Rows that differ from the cases' rows in one equality column each.
    w.teamX = (await ins('teams', { uid: uid(), tenant_id: w.t1, name: 'East' })).id;
    w.fia3 = (await ins('financial_institution_accounts', {
      tenant_id: w.t1, tenant_account_id: w.ta1, financial_institution_id: w.fi, company_code: '0003',
    })).id;
    w.fi2 = (await ins('financial_institutions', { code: '002', name: 'Other bank' })).id;
    await ins('tenant_financial_institutions', { tenant_id: w.t1, financial_institution_id: w.fi2 });
    w.scFi2 = (await ins('store_codes', { tenant_id: w.t1, financial_institution_id: w.fi2, code: '0042', broker_id: w.b1 })).id;
    w.scT2 = (await ins('store_codes', { tenant_id: w.t2, financial_institution_id: w.fi, code: '0043', broker_id: w.b1 })).id;
  });
  for (const c of cases) {
    it(`${c.id} R-EXC-01 R-EXC-06 R-DB-18 ${c.constraint} refuses overlaps, accepts adjacent periods`, async () => {
      await c.row('2024-01-01', '2024-02-01');
      // The day in valid_until belongs to the next period: adjacent periods do not overlap.
      await c.row('2024-02-01', '2024-03-01');
      await c.row('2024-03-01', null);
      const overlap = await refusal(() => c.row('2024-01-15', '2024-01-20'));
      expect([overlap.code, overlap.constraint_name]).toEqual(['23P01', c.constraint]);
      // A null valid_until has no defined end: anything later overlaps it.
      const open = await refusal(() => c.row('2030-01-01', '2030-02-01'));
      expect([open.code, open.constraint_name]).toEqual(['23P01', c.constraint]);
      const order = await refusal(() => c.row('2020-01-02', '2020-01-02'));
      expect([order.code, order.constraint_name]).toEqual(['23514', c.period]);
      // R-EXC-01: GiST, the equality columns with =, the half-open daterange with the overlap operator.
      const [def] = await db.sql`SELECT am.amname, pg_get_constraintdef(c.oid) AS def FROM pg_constraint c
        JOIN pg_class i ON i.oid = c.conindid JOIN pg_am am ON am.oid = i.relam WHERE c.conname = ${c.constraint}`;
      expect(def!.amname).toBe('gist');
      expect(def!.def).toMatch(/^EXCLUDE USING gist \((\w+ WITH =, )+daterange\(valid_from, valid_until, '\[\)'::text\) WITH &&\)$/);
      // Only the same key is excluded: a row differing in any one equality column overlaps freely.
      for (const [what, neighbour] of c.neighbours) {
        const accepted = await neighbour('2024-01-15', null).catch((e: Error) => e);
        expect(accepted, `${c.constraint}: ${what} with an overlapping period`).not.toBeInstanceOf(Error);
      }
    });
  }
});

describe('partial unique indexes: a closed row plus one open row, never two open', () => {
  const suffix = () => randomBytes(4).toString('hex');
  const cases: Array<{ id: string; index: string; row: (open: boolean) => Promise<Row> }> = [
    {
      id: 'R-IDX-01',
      index: 'memberships_live_key',
      row: (open) => ins('memberships', {
        uid: uid(), tenant_id: w.t2, user_id: w.u3, removed_at: open ? null : '2024-01-01T00:00:00Z',
      }),
    },
    {
      id: 'R-IDX-02',
      index: 'membership_brokers_live_key',
      row: (open) => ins('membership_brokers', {
        tenant_id: w.t1, membership_id: w.m2, user_id: w.u2, broker_id: w.b2, role: 'member',
        valid_from: '2024-01-01', valid_until: open ? null : '2024-02-01',
      }),
    },
    {
      id: 'R-IDX-03 R-AUTHZ-23 R-AUTHZ-24',
      index: 'platform_grants_live_key',
      row: (open) => ins('platform_grants', {
        user_id: w.u2, platform_access_profile_id: w.pap, granted_by_user_id: w.u1, reason: 'ops',
        origin_platform_invitation_id: w.pinv,
        ...(open ? {} : { revoked_at: '2024-01-01T00:00:00Z', revoked_by_user_id: w.u1 }),
      }),
    },
    {
      id: 'R-IDX-04',
      index: 'credential_versions_one_active_key',
      row: async (open) => {
        const versions = await db.sql`SELECT count(*)::int AS n FROM credential_versions WHERE credential_id = ${w.pwd}`;
        return ins('credential_versions', {
          credential_id: w.pwd, version: versions[0]!.n + 1, algorithm: 'scrypt', secret: digest(),
          retired_at: open ? null : '2024-01-01T00:00:00Z',
        });
      },
    },
    {
      id: 'R-IDX-05 R-BANK-07',
      index: 'bank_assignments_one_open_key',
      row: (open) => assignment(w.ubIdx, w.b1, w.mb1, open ? null : '2023-06-01', open ? '2024-01-01' : '2023-01-01'),
    },
    {
      id: 'R-IDX-06',
      index: 'user_logins_live_key',
      row: (open) => ins('user_logins', {
        user_id: open ? w.u2 : w.u1, tenant_id: w.t1, kind: 'email', value: 'Shared@X.io', value_normalized: 'shared@x.io',
        removed_at: open ? null : '2024-01-01T00:00:00Z',
      }),
    },
    {
      id: 'R-SEED-15',
      index: 'platform_logins_live_key',
      row: (open) => ins('platform_logins', {
        user_id: w.u1, kind: 'username', value: 'Root', value_normalized: 'root',
        removed_at: open ? null : '2024-01-01T00:00:00Z',
      }),
    },
    {
      id: 'R-AUTHZ-32',
      index: 'session_contexts_live_key',
      row: async (open) => {
        const grant = await db.sql`SELECT id FROM platform_grants WHERE user_id = ${w.u2} ORDER BY id LIMIT 1`;
        return ins('session_contexts', {
          session_id: w.session, platform_grant_id: grant[0]!.id, tenant_id: w.t1, reason: 'support',
          left_at: open ? null : '2024-01-01T00:00:00Z',
        });
      },
    },
    {
      id: 'R-BANK-04',
      index: 'user_banks_open_key',
      row: async (open) => ({ id: (await bankUser(open ? null : '2024-01-01T00:00:00Z', w.u3)).userBank }),
    },
    {
      id: 'R-BRK-05',
      index: 'broker_affiliations_open_key',
      row: (open) => ins('broker_affiliations', {
        uid: uid(), tenant_id: w.t1, broker_id: w.b2, parent_id: w.b1, started_on: '2024-01-01',
        ended_on: open ? null : '2024-02-01',
      }),
    },
    {
      id: 'R-BRK-07',
      index: 'tenant_broker_accounts_open_key',
      row: (open) => ins('tenant_broker_accounts', {
        tenant_id: w.t1, broker_id: w.b1, tenant_account_id: w.ta1, valid_from: '2024-01-01',
        valid_until: open ? null : '2024-02-01',
      }),
    },
    {
      id: 'R-DB-21',
      index: 'membership_access_profiles_open_key',
      row: (open) => ins('membership_access_profiles', {
        tenant_id: w.t1, membership_id: w.m2, access_profile_id: w.apTenant, valid_from: '2024-01-01',
        valid_until: open ? null : '2024-02-01',
      }),
    },
    {
      id: 'R-DB-21',
      index: 'membership_portfolios_open_key',
      row: (open) => ins('membership_portfolios', {
        tenant_id: w.t1, broker_id: w.b2, membership_id: w.m2, valid_from: open ? '2024-02-01' : '2024-01-01',
        valid_until: open ? null : '2024-02-01',
      }),
    },
    {
      id: 'R-DB-20',
      index: 'session_memberships_live_key',
      row: (open) => ins('session_memberships', {
        session_id: w.session, user_id: w.u1, tenant_id: w.t1, membership_id: w.m1,
        left_at: open ? null : '2024-01-01T00:00:00Z',
      }),
    },
    {
      id: 'R-DB-20',
      index: 'refresh_tokens_live_key',
      row: (open) => ins('refresh_tokens', {
        session_id: w.session, token_sha256: digest(), expires_at: '2099-01-01T00:00:00Z',
        consumed_at: open ? null : '2024-01-01T00:00:00Z',
      }),
    },
    {
      id: 'R-DB-20',
      index: 'invitations_pending_key',
      row: (open) => ins('invitations', {
        uid: uid(), tenant_id: w.t2, channel: 'email', destination: 'p@x.io', destination_normalized: 'p@x.io',
        token_sha256: digest(), status: open ? 'pending' : 'expired', expires_at: '2099-01-01T00:00:00Z',
        created_by_user_id: w.u1,
      }),
    },
  ];

  beforeAll(async () => {
    w.pwd = (await ins('credentials', { uid: uid(), kind: 'password' })).id;
    w.ubIdx = (await bankUser()).userBank;
  });

  it('covers every partial unique index of the database', async () => {
    const rows = await db.sql`SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
      WHERE i.indisunique AND i.indpred IS NOT NULL AND c.relnamespace = 'public'::regnamespace ORDER BY 1`;
    expect(cases.map((c) => c.index).sort()).toEqual(rows.map((r) => r.relname));
  });

  for (const c of cases) {
    it(`${c.id} ${c.index}`, async () => {
      await c.row(false);
      await c.row(true);
      const e = await refusal(() => c.row(true));
      expect([e.code, e.constraint_name], `${suffix()} ${e.message}`).toEqual(['23505', c.index]);
    });
  }
});

describe('same tenant by construction and pinned copies', () => {
  it('R-DB-15 a membership_teams row cannot join a team and a membership of different tenants', async () => {
    const e = await refusal(() => ins('membership_teams', {
      tenant_id: w.t1, team_id: w.team1, membership_id: w.m3, valid_from: '2024-01-01',
    }));
    expect([e.code, e.constraint_name]).toEqual(['23503', 'membership_teams_membership_fkey']);
    const e2 = await refusal(() => ins('membership_teams', {
      tenant_id: w.t2, team_id: w.team1, membership_id: w.m3, valid_from: '2024-01-01',
    }));
    expect([e2.code, e2.constraint_name]).toEqual(['23503', 'membership_teams_team_fkey']);
  });

  it('R-DB-15 R-EXC-05 a hierarchy edge cannot cross tenants', async () => {
    const e = await refusal(() => ins('team_hierarchies', {
      tenant_id: w.t1, subordinate_team_id: w.team3, superior_team_id: w.team1, valid_from: '2024-01-01',
    }));
    expect([e.code, e.constraint_name]).toEqual(['23503', 'team_hierarchies_subordinate_fkey']);
  });

  it('R-DB-16 membership_brokers.user_id is pinned to the membership user', async () => {
    const e = await refusal(() => ins('membership_brokers', {
      tenant_id: w.t1, membership_id: w.m1, user_id: w.u2, broker_id: w.b1, role: 'member', valid_from: '2030-01-01',
      valid_until: '2030-02-01',
    }));
    expect([e.code, e.constraint_name]).toEqual(['23503', 'membership_brokers_membership_fkey']);
  });

  it('R-DB-17 a broker-linked profile must be of that broker; a tenant-level link needs a tenant profile', async () => {
    // Refused probes are closed rows, so the one-open-row index never answers first.
    const link = (brokerId: string | null, profile: string, validUntil: string | null = '2024-02-01') =>
      ins('membership_access_profiles', {
        tenant_id: w.t1, membership_id: w.m1, broker_id: brokerId, access_profile_id: profile, valid_from: '2024-01-01',
        valid_until: validUntil,
      });
    const ok = await link(w.b1, w.apBroker1, null);
    expect(ok.profile_scope).toBe('broker');
    expect((await link(null, w.apTenant, null)).profile_scope).toBe('tenant');
    expect((await refusal(() => link(w.b1, w.apBroker2))).constraint_name).toBe('membership_access_profiles_profile_broker_fkey');
    expect((await refusal(() => link(null, w.apBroker1))).constraint_name).toBe('membership_access_profiles_profile_scope_fkey');
    expect((await refusal(() => link(w.b1, w.apTenant))).constraint_name).toBe('membership_access_profiles_profile_scope_fkey');
    expect((await refusal(() => link(null, w.apOtherTenant))).code).toBe('23503');
    // An invitation's profile is a tenant-level link: its constant scope column is checked and referenced.
    const invite = (profile: string, scope = 'tenant') =>
      ins('invitations', {
        uid: uid(), tenant_id: w.t1, channel: 'email', destination: `${uid()}@x.io`, destination_normalized: `${uid()}@x.io`,
        token_sha256: digest(), expires_at: '2099-01-01T00:00:00Z', created_by_user_id: w.u1,
        access_profile_id: profile, access_profile_scope: scope,
      });
    await invite(w.apTenant);
    expect((await refusal(() => invite(w.apBroker1))).constraint_name).toBe('invitations_profile_fkey');
    expect((await refusal(() => invite(w.apBroker1, 'broker'))).constraint_name).toBe('invitations_access_profile_scope_check');
  });

  it('R-BANK-08 an assignment origin link must be of the same tenant, broker and user', async () => {
    const { userBank } = await bankUser();
    const e = await refusal(() => assignment(userBank, w.b1, w.mb2, null));
    expect([e.code, e.constraint_name]).toEqual(['23503', 'bank_user_assignments_origin_link_fkey']);
    const wrongParty = await refusal(() => ins('bank_user_assignments', {
      user_bank_id: userBank, user_id: w.u1, party_id: w.p2, financial_institution_id: w.fi, tenant_id: w.t1,
      broker_id: w.b1, valid_from: '2024-01-01', store_code_id: w.sc1, origin_membership_broker_id: w.mb1,
    }));
    expect(wrongParty.constraint_name).toBe('bank_user_assignments_user_party_fkey');
  });

  it('R-DB-20 an open row is closed by setting its end date, after which a new open row is accepted', async () => {
    // membership_brokers (valid_until): one open link per (membership, broker).
    const open = () => ins('membership_brokers', {
      tenant_id: w.t1, membership_id: w.m2, user_id: w.u2, broker_id: w.b1, role: 'member', valid_from: '2025-01-01',
    });
    const first = await open();
    expect((await refusal(open)).constraint_name).toBe('membership_brokers_live_key');
    await db.sql`UPDATE membership_brokers SET valid_until = '2025-06-01' WHERE id = ${first.id}`;
    await open();
    // broker_affiliations (ended_on): one open affiliation per (tenant, broker).
    const affiliate = () => ins('broker_affiliations', {
      uid: uid(), tenant_id: w.t2, broker_id: w.b1, parent_id: w.b1, started_on: '2025-01-01',
    });
    const affiliation = await affiliate();
    expect((await refusal(affiliate)).constraint_name).toBe('broker_affiliations_open_key');
    await db.sql`UPDATE broker_affiliations SET ended_on = '2025-02-01' WHERE id = ${affiliation.id}`;
    await affiliate();
  });

  it('R-DB-21 membership_portfolios has a period CHECK; company_ownerships allows any number of open rows', async () => {
    const portfolio = await refusal(() => ins('membership_portfolios', {
      tenant_id: w.t1, broker_id: w.b1, membership_id: w.m1, valid_from: '2024-02-01', valid_until: '2024-02-01',
    }));
    expect([portfolio.code, portfolio.constraint_name]).toEqual(['23514', 'membership_portfolios_period_check']);
    const own = () => ins('company_ownerships', { company_party_id: w.company, owner_party_id: w.p2, started_on: '2024-01-01' });
    await own();
    await own();
    const [n] = await db.sql`SELECT count(*)::int AS n FROM company_ownerships
      WHERE company_party_id = ${w.company} AND owner_party_id = ${w.p2} AND ended_on IS NULL`;
    expect(n!.n).toBe(2);
  });

  it('R-BANK-07 R-DB-22 an assignment period must end after it starts; closed periods may overlap (no EXCLUDE)', async () => {
    const { userBank } = await bankUser();
    for (const until of ['2024-01-01', '2023-12-31']) {
      const e = await refusal(() => assignment(userBank, w.b1, w.mb1, until));
      expect([e.code, e.constraint_name], until).toEqual(['23514', 'bank_user_assignments_period_check']);
    }
    // Two closed, overlapping periods of the same bank user with the same broker: accepted, overlap of
    // closed periods is the application's business here.
    await assignment(userBank, w.b1, w.mb1, '2024-03-01');
    await assignment(userBank, w.b1, w.mb1, '2024-04-01', '2024-02-01');
    await assignment(userBank, w.b2, w.mb2, '2024-02-15', '2024-02-10');
    const rows = await db.sql`SELECT count(*)::int AS n FROM bank_user_assignments WHERE user_bank_id = ${userBank}`;
    expect(rows[0]!.n).toBe(3);
    const excludes = await db.sql`SELECT conname FROM pg_constraint
      WHERE conrelid = 'bank_user_assignments'::regclass AND contype = 'x'`;
    expect(excludes).toEqual([]);
  });

  it('R-BRK-08 a store code has exactly one owner; R-BRK-09 its code is unique per tenant and institution', async () => {
    const code = (values: Row) => ins('store_codes', { tenant_id: w.t1, financial_institution_id: w.fi, ...values });
    expect((await refusal(() => code({ code: '7', financial_institution_account_id: w.fia1, broker_id: w.b1 }))).constraint_name)
      .toBe('store_codes_one_owner_check');
    expect((await refusal(() => code({ code: '8' }))).constraint_name).toBe('store_codes_one_owner_check');
    expect((await refusal(() => code({ code: '9', financial_institution_account_id: w.fia2 }))).constraint_name)
      .toBe('store_codes_account_fkey');
    const owned = await code({ code: '0009', broker_id: w.b1 });
    expect(owned.code).toBe('0009');
    expect((await refusal(() => code({ code: '0009', broker_id: w.b2 }))).constraint_name)
      .toBe('store_codes_tenant_institution_code_key');
    await ins('store_codes', { tenant_id: w.t2, financial_institution_id: w.fi, code: '0009', broker_id: w.b1 });
  });
});

describe('generated scopes', () => {
  it('R-AUTHZ-06 R-CEIL-03 access_profiles.scope is generated: tenant without broker, broker with one', async () => {
    const rows = await db.sql`SELECT id, scope FROM access_profiles WHERE id IN (${w.apTenant}, ${w.apBroker1}) ORDER BY id`;
    expect(rows.map((r) => r.scope)).toEqual(['tenant', 'broker']);
    const e = await refusal(() => db.sql`INSERT INTO access_profiles (tenant_id, name, scope) VALUES (${w.t1}, 'x', 'broker')`);
    expect(e.code).toBe('428C9');
  });

  it('R-AUTHZ-08 profile names are unique per tenant and broker, nulls counting as equal', async () => {
    const e = await refusal(() => ins('access_profiles', { tenant_id: w.t1, name: 'admins' }));
    expect([e.code, e.constraint_name]).toEqual(['23505', 'access_profiles_name_key']);
    await ins('access_profiles', { tenant_id: w.t1, broker_id: w.b1, name: 'admins' });
  });
});

describe('append-only audit tables (this schema\'s 6 triggers)', () => {
  const tables = [
    'permission_changes', 'access_profile_template_changes', 'access_profile_template_change_decisions',
    'platform_invitation_delivery_events', 'bank_user_transfers', 'bank_credential_deliveries',
  ];

  beforeAll(async () => {
    await ins('permission_changes', { permission_code: 'x.y', change: 'added', commit_sha: 'a', commit_author: 'b', deployed_by: 'ci' });
    const template = (await ins('access_profile_templates', { tenant_id: w.t1, scope: 'tenant', name: 'T', description: 'd' })).id;
    const change = (await ins('access_profile_template_changes', {
      tenant_id: w.t1, template_id: template, from_version: 1, to_version: 2, added_permission_ids: [1],
      removed_permission_ids: [], reason: 'r', changed_by_user_id: w.u1,
    })).id;
    await ins('access_profile_template_change_decisions', { change_id: change, access_profile_id: w.apTenant, decision: 'followed', affected_users: 0 });
    const delivery = (await ins('platform_invitation_deliveries', {
      uid: uid(), platform_invitation_id: w.pinv, channel: 'sms', destination_normalized: '+55', provider: 'sns',
      requested_by_user_id: w.u1,
    })).id;
    await ins('platform_invitation_delivery_events', { delivery_id: delivery, status: 'sent', occurred_at: '2024-01-01T00:00:00Z', dedup_key: 'e' });
    const { userBank, credential } = await bankUser();
    const from = (await assignment(userBank, w.b1, w.mb1, '2024-03-01')).id;
    const to = (await assignment(userBank, w.b2, w.mb2, null, '2024-03-01')).id;
    await ins('bank_user_transfers', {
      tenant_id: w.t1, user_bank_id: userBank, from_assignment_id: from, from_broker_id: w.b1, to_assignment_id: to,
      to_broker_id: w.b2, effective_on: '2024-03-01', actor_user_id: w.u1, reason: 'move',
    });
    w.transferFrom = from;
    w.transferTo = to;
    w.transferBank = userBank;
    const version = (await ins('credential_versions', { credential_id: credential, version: 1, algorithm: 'aes-256-gcm', secret: digest() })).id;
    await ins('bank_credential_deliveries', {
      credential_version_id: version, credential_id: credential, user_bank_id: userBank, assignment_id: to,
      viewed_by_user_id: w.u1, tenant_id: w.t1,
    });
  });

  for (const table of tables) {
    it(`R-AUTHZ-05 R-AUTHZ-13 R-AUTHZ-14 R-AUTHZ-30 R-BANK-10 R-BANK-13 ${table} refuses UPDATE, DELETE and TRUNCATE`, async () => {
      expect(Number((await db.sql`SELECT count(*) AS n FROM ${db.sql(table)}`)[0]!.n)).toBeGreaterThan(0);
      // Any column will do (not an identity one, which refuses UPDATE by itself).
      const column = (await db.sql`SELECT column_name FROM information_schema.columns
        WHERE table_schema = 'public' AND table_name = ${table} AND is_identity = 'NO'
        ORDER BY ordinal_position LIMIT 1`)[0]!.column_name as string;
      for (const statement of [`UPDATE ${table} SET ${column} = ${column}`, `DELETE FROM ${table}`, `TRUNCATE ${table} CASCADE`]) {
        const e = await refusal(() => db.sql.unsafe(statement));
        expect([e.code, e.message], statement).toEqual(['23001', expect.stringContaining(`${table} is append-only`)]);
      }
    });
  }

  it('R-BANK-11 a transfer names two different assignments of the same bank user, each used once', async () => {
    const transfer = (from: string, to: string, fromBroker = w.b1, toBroker = w.b2, effectiveOn = '2024-03-01') =>
      ins('bank_user_transfers', {
        tenant_id: w.t1, user_bank_id: w.transferBank, from_assignment_id: from, from_broker_id: fromBroker,
        to_assignment_id: to, to_broker_id: toBroker, effective_on: effectiveOn, actor_user_id: w.u1, reason: 'x',
      });
    expect((await refusal(() => transfer(w.transferTo, w.transferTo, w.b2, w.b2))).constraint_name).toBe('bank_user_transfers_distinct_check');
    // Each assignment is used once whatever else differs (another date here).
    expect((await refusal(() => transfer(w.transferFrom, w.transferTo, w.b1, w.b2, '2024-04-01'))).constraint_name)
      .toBe('bank_user_transfers_from_assignment_id_key');
    expect((await refusal(() => transfer(w.transferTo, w.transferFrom, w.b1, w.b1))).constraint_name).toBe('bank_user_transfers_from_fkey');
    // Two more closed assignments of the same bank user (b1 then b2), not yet in any transfer.
    const x = (await assignment(w.transferBank, w.b1, w.mb1, '2023-06-01', '2023-01-01')).id;
    const y = (await assignment(w.transferBank, w.b2, w.mb2, '2023-12-01', '2023-06-01')).id;
    // The destination is unique across the table too.
    expect((await refusal(() => transfer(x, w.transferTo, w.b1, w.b2, '2023-06-01'))).constraint_name)
      .toBe('bank_user_transfers_to_assignment_id_key');
    // The stated destination broker must be the destination assignment's.
    expect((await refusal(() => transfer(x, y, w.b1, w.b1))).constraint_name).toBe('bank_user_transfers_to_fkey');
    // Both assignments belong to the transfer's bank user and tenant.
    const other = await bankUser('2024-01-01T00:00:00Z');
    const z = (await assignment(other.userBank, w.b2, w.mb2, '2023-12-01', '2023-06-01')).id;
    expect((await refusal(() => transfer(x, z))).constraint_name).toBe('bank_user_transfers_to_fkey');
    const otherTenant = await refusal(() => ins('bank_user_transfers', {
      tenant_id: w.t2, user_bank_id: w.transferBank, from_assignment_id: x, from_broker_id: w.b1, to_assignment_id: y,
      to_broker_id: w.b2, effective_on: '2023-06-01', actor_user_id: w.u1, reason: 'x',
    }));
    expect(otherTenant.code).toBe('23503');
    // The same pair with the right brokers is accepted.
    await transfer(x, y);
  });
});

// ───────────── parity between the drizzle model and the migrated database (R-MIG-06) ─────────────

/** Objects hand-written in sql/<domain>/constraints.sql because drizzle cannot express them there. */
const HAND_WRITTEN_FOREIGN_KEYS = [
  'user_logins_tenant_fkey',
  'tenants_blueprint_fkey',
  'session_memberships_membership_fkey',
  'session_membership_brokers_link_fkey',
];
const HAND_WRITTEN_UNIQUE_INDEXES = ['access_profiles_name_key'];

function modelTables(): PgTable[] {
  const out: PgTable[] = [];
  for (const mod of Object.values(DOMAIN_MODULES)) for (const v of Object.values(mod)) if (v instanceof PgTable) out.push(v);
  return out;
}

const normalizeDefault = (d: unknown): string | null =>
  d === undefined || d === null ? null : String(d).replace(/::(text|integer)$/, '').replace(/^'(.*)'$/, '$1');

describe('R-MIG-06 parity: drizzle model vs migrated database', () => {
  it('R-DB-01 the model has the 71 domain tables in 11 domains', () => {
    expect(modelTables().length).toBe(71);
    expect(Object.keys(DOMAIN_MODULES).length).toBe(11);
  });

  it('columns: names, types, nullability, defaults, identity and generated flags', async () => {
    const snapshot = generateDrizzleJson(Object.fromEntries(Object.entries(DOMAIN_MODULES).flatMap(([d, m]) =>
      Object.entries(m).map(([k, v]) => [`${d}.${k}`, v]))));
    const dbColumns = await db.sql`SELECT c.table_name, c.column_name, c.is_nullable, c.column_default, c.is_identity,
        c.identity_generation, c.is_generated, format_type(a.atttypid, a.atttypmod) AS type
      FROM information_schema.columns c
      JOIN pg_attribute a ON a.attrelid = format('public.%I', c.table_name)::regclass AND a.attname = c.column_name
      WHERE c.table_schema = 'public'`;
    const byTable = new Map<string, Row[]>();
    for (const c of dbColumns) byTable.set(c.table_name, [...(byTable.get(c.table_name) ?? []), c]);
    for (const table of modelTables()) {
      const { name, columns } = getTableConfig(table);
      const model = (snapshot.tables as Record<string, any>)[`public.${name}`];
      const actual = byTable.get(name) ?? [];
      expect(actual.map((c) => c.column_name).sort(), name).toEqual(columns.map((c) => c.name).sort());
      for (const column of columns) {
        const m = model.columns[column.name];
        const a = actual.find((c) => c.column_name === column.name)!;
        const where = `${name}.${column.name}`;
        expect(a.type.replace(/, /g, ','), where).toBe(String(m.type).replace(/, /g, ','));
        expect(a.is_nullable === 'NO', where).toBe(Boolean(m.notNull || m.primaryKey));
        expect(a.is_identity === 'YES' && a.identity_generation === 'ALWAYS', where).toBe(Boolean(m.identity));
        expect(a.is_generated === 'ALWAYS', where).toBe(Boolean(m.generated));
        expect(normalizeDefault(a.column_default), where).toBe(normalizeDefault(m.default));
      }
    }
  });

  it('foreign keys: columns, targets, NO ACTION and not deferrable; hand-written ones come from constraints.sql', async () => {
    const dbFks = await db.sql`SELECT c.conname, c.conrelid::regclass::text AS table_name, c.confrelid::regclass::text AS target,
        (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.conkey) WITH ORDINALITY k(n, ord)
          JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n)::text[] AS columns,
        (SELECT array_agg(a.attname ORDER BY k.ord) FROM unnest(c.confkey) WITH ORDINALITY k(n, ord)
          JOIN pg_attribute a ON a.attrelid = c.confrelid AND a.attnum = k.n)::text[] AS target_columns,
        c.confupdtype, c.confdeltype, c.condeferrable
      FROM pg_constraint c WHERE c.contype = 'f' AND c.connamespace = 'public'::regnamespace`;
    const tables = modelTables();
    const names = new Set(tables.map((t) => getTableConfig(t).name));
    const model = tables.flatMap((t) => getTableConfig(t).foreignKeys.map((fk) => {
      const ref = fk.reference();
      return {
        conname: fk.getName(), table_name: getTableConfig(t).name, target: getTableConfig(ref.foreignTable).name,
        columns: ref.columns.map((c) => c.name), target_columns: ref.foreignColumns.map((c) => c.name),
        actions: [fk.onUpdate ?? 'no action', fk.onDelete ?? 'no action'],
      };
    }));
    const domainDbFks = dbFks.filter((f) => names.has(f.table_name));
    expect(domainDbFks.length).toBe(166);
    expect(domainDbFks.map((f) => f.conname).sort()).toEqual([...model.map((m) => m.conname), ...HAND_WRITTEN_FOREIGN_KEYS].sort());
    for (const m of model) {
      const a = domainDbFks.find((f) => f.conname === m.conname)!;
      expect({ ...m, actions: undefined }, m.conname).toEqual({
        conname: a.conname, table_name: a.table_name, target: a.target, columns: a.columns,
        target_columns: a.target_columns, actions: undefined,
      });
      expect(m.actions, m.conname).toEqual(['no action', 'no action']);
    }
    for (const f of domainDbFks) expect([f.confupdtype, f.confdeltype, f.condeferrable], f.conname).toEqual(['a', 'a', false]);
    const handWritten = fs.readdirSync(path.join(ROOT, 'sql'))
      .map((d) => path.join(ROOT, 'sql', d, 'constraints.sql')).filter((f) => fs.existsSync(f))
      .map((f) => fs.readFileSync(f, 'utf8')).join('\n');
    for (const name of HAND_WRITTEN_FOREIGN_KEYS) expect(handWritten, name).toContain(`ADD CONSTRAINT ${name} FOREIGN KEY`);
  });

  it('unique constraints and unique indexes (with their predicates) match the model', async () => {
    const tables = modelTables();
    const names = new Set(tables.map((t) => getTableConfig(t).name));
    const dbUniques = (await db.sql`SELECT conname, conrelid::regclass::text AS table_name FROM pg_constraint
      WHERE contype = 'u' AND connamespace = 'public'::regnamespace`).filter((u) => names.has(u.table_name));
    const modelUniques = tables.flatMap((t) => getTableConfig(t).uniqueConstraints.map((u) => u.getName()));
    expect(dbUniques.map((u) => u.conname).sort()).toEqual(modelUniques.sort());
    expect(modelUniques.length).toBe(81);
    const dbIndexes = (await db.sql`SELECT c.relname, t.relname AS table_name, pg_get_expr(i.indpred, i.indrelid) AS predicate
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
      WHERE i.indisunique AND NOT i.indisprimary AND c.relnamespace = 'public'::regnamespace
        AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`).filter((i) => names.has(i.table_name));
    const modelIndexes = tables.flatMap((t) => getTableConfig(t).indexes.filter((i) => i.config.unique).map((i) => i.config));
    expect(dbIndexes.map((i) => i.relname).sort()).toEqual([...modelIndexes.map((i) => i.name!), ...HAND_WRITTEN_UNIQUE_INDEXES].sort());
    for (const m of modelIndexes) {
      const a = dbIndexes.find((i) => i.relname === m.name)!;
      expect(Boolean(a.predicate), m.name).toBe(Boolean(m.where));
    }
  });
});

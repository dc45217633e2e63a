// PlatformBootstrapSeeder: creates the first platform operator, once. As soon as any platform_grants
// row exists (active or revoked) it does nothing and reads no variable: revoking the operator, changing
// the variables or editing the profile never recreates anything; later operators come from invitations.
// Otherwise, in the seeders' single transaction, it creates:
//   party (person) + person profile and user of the operator;
//   a username-kind platform login (no tenant);
//   a password credential: credentials + credential_versions (scrypt hash, never the password) + user_credentials;
//   the platform administration profile holding every platform-scope permission of the registry;
//   an already accepted platform invitation to PLATFORM_BOOTSTRAP_EMAIL (only the SHA-256 of a random
//   token is stored; the token itself is discarded), the mandatory origin of the grant;
//   the platform grant, granted by the operator itself.
// It creates no tenant. Nothing secret is logged.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { TxSql } from '../src/db/client.ts';
import type { SeedContext, Seeder } from '../src/migrator/seed-runner.ts';
import { PASSWORD_ALGORITHM, hashPassword } from './password-hash.ts';
import { readBootstrapVariables } from './platform-bootstrap-variables.ts';
import { SeederError } from './seeder-error.ts';

export const PLATFORM_ADMIN_PROFILE_NAME = 'Platform administration';
export const BOOTSTRAP_PROCESS = 'PlatformBootstrapSeeder';

export const PlatformBootstrapSeeder: Seeder = {
  name: 'PlatformBootstrapSeeder',
  async run(tx: TxSql, ctx: SeedContext): Promise<void> {
    const [existing] = await tx`SELECT EXISTS (SELECT 1 FROM platform_grants) AS any`;
    if (existing!.any) {
      ctx.log('platform bootstrap: a platform grant exists (active or revoked); nothing to do');
      return;
    }

    const v = readBootstrapVariables(ctx.env);
    const usernameNormalized = v.username.toLowerCase();
    // Any platform login with that username, live or removed, belongs to someone: refuse, never take it over.
    const [taken] = await tx`
      SELECT EXISTS (SELECT 1 FROM platform_logins WHERE kind = 'username' AND value_normalized = ${usernameNormalized}) AS taken`;
    if (taken!.taken) {
      throw new SeederError(
        'PLATFORM_BOOTSTRAP_USERNAME_TAKEN',
        'PLATFORM_BOOTSTRAP_USERNAME names an existing platform login; it is refused, not taken over. Choose another username.',
      );
    }

    const [party] = await tx`
      INSERT INTO parties (kind, display_name) VALUES ('person', ${v.name}) RETURNING id`;
    await tx`INSERT INTO person_profiles (party_id, full_name) VALUES (${party!.id}, ${v.name})`;
    const [user] = await tx`INSERT INTO users (party_id) VALUES (${party!.id}) RETURNING id`;
    const userId = user!.id as string;
    await tx`
      INSERT INTO platform_logins (user_id, kind, value, value_normalized)
      VALUES (${userId}, 'username', ${v.username}, ${usernameNormalized})`;

    const secret = Buffer.from(await hashPassword(v.password), 'utf8');
    const [credential] = await tx`
      INSERT INTO credentials (uid, kind) VALUES (${randomUUID()}, 'password') RETURNING id`;
    await tx`
      INSERT INTO credential_versions (credential_id, version, algorithm, secret)
      VALUES (${credential!.id}, 1, ${PASSWORD_ALGORITHM}, ${secret})`;
    await tx`INSERT INTO user_credentials (user_id, credential_id) VALUES (${userId}, ${credential!.id})`;

    // The profile may already exist (created by hand before any grant): reuse it, keep its name.
    await tx`INSERT INTO platform_access_profiles (name) VALUES (${PLATFORM_ADMIN_PROFILE_NAME}) ON CONFLICT (name) DO NOTHING`;
    const [profile] = await tx`SELECT id FROM platform_access_profiles WHERE name = ${PLATFORM_ADMIN_PROFILE_NAME}`;
    const linked = await tx`
      INSERT INTO platform_access_profile_permissions (platform_access_profile_id, permission_id)
      SELECT ${profile!.id}, id FROM permissions WHERE scope = 'platform' AND deprecated_at IS NULL
      ON CONFLICT DO NOTHING RETURNING permission_id`;

    const tokenSha256 = createHash('sha256').update(randomBytes(32)).digest();
    const [invitation] = await tx`
      INSERT INTO platform_invitations (uid, channel, destination, destination_normalized, token_sha256,
        platform_access_profile_id, status, expires_at, created_by_process, accepted_at, accepted_by_user_id)
      VALUES (${randomUUID()}, 'email', ${v.email}, ${v.email.toLowerCase()}, ${tokenSha256},
        ${profile!.id}, 'accepted', clock_timestamp() + interval '7 days', ${BOOTSTRAP_PROCESS}, clock_timestamp(), ${userId})
      RETURNING id`;
    await tx`
      INSERT INTO platform_grants (user_id, platform_access_profile_id, granted_by_user_id, reason, origin_platform_invitation_id)
      VALUES (${userId}, ${profile!.id}, ${userId}, 'platform bootstrap: first operator', ${invitation!.id})`;

    ctx.log(
      `platform bootstrap: created the first platform operator (login ${v.username}) with profile ` +
        `"${PLATFORM_ADMIN_PROFILE_NAME}" holding ${linked.length} platform permission(s)`,
    );
  },
};

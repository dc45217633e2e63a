// Reveals a bank user's current password once per password version (R-BANK-14).
//   * The viewer is the server-side authenticated identity (`viewer`, built by the portal's session
//     handling), never a field of the request: the payload may carry only the bank user id, and any other
//     key (e.g. a viewer id) is refused.
//   * The reveal happens only in the portal: the viewer must come from the portal surface.
//   * The delivery row (bank_credential_deliveries, primary key = credential version) is written in the
//     unit of work, and the password is handed back only after that unit of work committed: if the
//     commit fails, the caller gets the error and no password. The ciphertext is opened inside the
//     transaction so an unreadable secret rolls back instead of consuming the one reveal.
// Unlike the other use cases this one owns its commit, so it takes the unit of work (a function running
// work in one transaction and resolving after commit, e.g. `(work) => inUnitOfWork(sql, actor, work)`).
import { z } from 'zod';
import type { TxSql } from '../db/client.ts';
import { BankUserError } from './bank-user-error.ts';
import type { SealedSecret } from './bank-password-sealing.ts';

export type UnitOfWork = <T>(work: (tx: TxSql) => Promise<T>) => Promise<T>;

/** Who is looking, as the portal's authenticated session says: tenant, membership and acting broker. */
export interface PortalViewer {
  surface: 'portal';
  userId: string;
  tenantId: string;
  membershipId: string;
  brokerId: string;
}

export const revealBankCredentialRequest = z.strictObject({
  userBankId: z.string().regex(/^[1-9][0-9]{0,18}$/),
});

export interface RevealedBankCredential {
  userBankId: string;
  credentialVersionId: string;
  version: number;
  consumedAt: string;
  password: string;
}

export async function revealBankCredential(
  unitOfWork: UnitOfWork,
  viewer: PortalViewer,
  payload: unknown,
  unseal: (sealed: SealedSecret) => string,
): Promise<RevealedBankCredential> {
  if (viewer.surface !== 'portal') throw new BankUserError('BANK_CREDENTIAL_PORTAL_ONLY');
  const parsed = revealBankCredentialRequest.safeParse(payload);
  if (!parsed.success) throw new BankUserError('BANK_CREDENTIAL_REQUEST_INVALID');
  const { userBankId } = parsed.data;

  const revealed = await unitOfWork(async (tx) => {
    // The viewer acts today for the broker, through a live membership of the tenant.
    const [acting] = await tx`
      SELECT 1 FROM memberships m
        JOIN membership_brokers mb ON mb.membership_id = m.id AND mb.broker_id = ${viewer.brokerId}
       WHERE m.id = ${viewer.membershipId} AND m.user_id = ${viewer.userId} AND m.tenant_id = ${viewer.tenantId}
         AND m.removed_at IS NULL
         AND mb.valid_from <= current_date AND (mb.valid_until IS NULL OR mb.valid_until > current_date)`;
    if (!acting) throw new BankUserError('BANK_CREDENTIAL_VIEWER_NOT_ALLOWED');

    // Reached only through an assignment of the viewer's tenant and broker, open today.
    const [assignment] = await tx`
      SELECT a.id::text, ub.credential_id::text
        FROM bank_user_assignments a
        JOIN user_banks ub ON ub.id = a.user_bank_id AND ub.closed_at IS NULL
       WHERE a.user_bank_id = ${userBankId} AND a.tenant_id = ${viewer.tenantId} AND a.broker_id = ${viewer.brokerId}
         AND a.valid_from <= current_date AND (a.valid_until IS NULL OR a.valid_until > current_date)`;
    if (!assignment) throw new BankUserError('BANK_USER_NOT_FOUND');

    // FOR SHARE: a password change (retiring this version) waits until the reveal is recorded.
    const [version] = await tx`
      SELECT id::text, version, algorithm, secret FROM credential_versions
       WHERE credential_id = ${assignment.credential_id} AND retired_at IS NULL FOR SHARE`;
    if (!version) throw new BankUserError('BANK_CREDENTIAL_NO_ACTIVE_VERSION');

    // The primary key makes the reveal one-shot; a concurrent second reveal waits here, then gets nothing.
    const [delivery] = await tx`
      INSERT INTO bank_credential_deliveries
        (credential_version_id, credential_id, user_bank_id, assignment_id, viewed_by_user_id, tenant_id)
      VALUES (${version.id}, ${assignment.credential_id}, ${userBankId}, ${assignment.id}, ${viewer.userId}, ${viewer.tenantId})
      ON CONFLICT (credential_version_id) DO NOTHING
      RETURNING consumed_at::text`;
    if (!delivery) throw new BankUserError('BANK_CREDENTIAL_ALREADY_REVEALED');

    return {
      userBankId,
      credentialVersionId: version.id as string,
      version: version.version as number,
      consumedAt: delivery.consumed_at as string,
      password: unseal({ algorithm: version.algorithm as string, secret: version.secret as Buffer }),
    };
  });
  // Reached only once the unit of work resolved, i.e. after its commit.
  return revealed;
}

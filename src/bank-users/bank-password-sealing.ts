// Bank passwords must be shown once per version (bank_credential_deliveries), so unlike a user's own
// password they are kept reversible: AES-256-GCM under a service key, stored in credential_versions as
// `secret` = 12-byte IV || 16-byte tag || ciphertext with algorithm `aes-256-gcm`. The key comes from
// configuration; these functions never log or echo the plaintext.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { BankUserError } from './bank-user-error.ts';

export const BANK_PASSWORD_ALGORITHM = 'aes-256-gcm';

export interface SealedSecret {
  algorithm: string;
  secret: Buffer;
}

function checkedKey(key: Buffer): Buffer {
  if (key.length !== 32) throw new BankUserError('BANK_CREDENTIAL_KEY_INVALID');
  return key;
}

export function sealBankPassword(key: Buffer, password: string): SealedSecret {
  const iv = randomBytes(12);
  const cipher = createCipheriv(BANK_PASSWORD_ALGORITHM, checkedKey(key), iv);
  const body = Buffer.concat([cipher.update(password, 'utf8'), cipher.final()]);
  return { algorithm: BANK_PASSWORD_ALGORITHM, secret: Buffer.concat([iv, cipher.getAuthTag(), body]) };
}

export function unsealBankPassword(key: Buffer, sealed: SealedSecret): string {
  checkedKey(key);
  if (sealed.algorithm !== BANK_PASSWORD_ALGORITHM || sealed.secret.length < 28) {
    throw new BankUserError('BANK_CREDENTIAL_UNREADABLE');
  }
  try {
    const decipher = createDecipheriv(BANK_PASSWORD_ALGORITHM, key, sealed.secret.subarray(0, 12));
    decipher.setAuthTag(sealed.secret.subarray(12, 28));
    return Buffer.concat([decipher.update(sealed.secret.subarray(28)), decipher.final()]).toString('utf8');
  } catch (error) {
    throw new BankUserError('BANK_CREDENTIAL_UNREADABLE', { cause: error });
  }
}

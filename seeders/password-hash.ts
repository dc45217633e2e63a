// Password hashing with scrypt from node:crypto: memory-hard, built into Node, nothing compiled at
// install. Parameters follow the OWASP Password Storage Cheat Sheet's scrypt recommendation:
// N = 2^17 (cost; 128 MiB of memory per hash with r = 8), r = 8 (block size), p = 1 (parallelism),
// a 16-byte random salt and a 32-byte derived key. The stored form is self-describing, in the PHC
// string style, so a later login can verify it and parameters can rise without a migration:
//   $scrypt$ln=17,r=8,p=1$<salt, base64 without padding>$<key, base64 without padding>
// It is kept as the UTF-8 bytes of that string in credential_versions.secret with algorithm 'scrypt'.
import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';

export interface ScryptParameters {
  /** log2 of the cost N. */
  logN: number;
  r: number;
  p: number;
  keyLength: number;
  saltLength: number;
}

/** The parameters new hashes use (see the file comment for the source). */
export const SCRYPT_PARAMETERS: Readonly<ScryptParameters> = Object.freeze({
  logN: 17,
  r: 8,
  p: 1,
  keyLength: 32,
  saltLength: 16,
});

export const PASSWORD_ALGORITHM = 'scrypt';

function derive(password: string, salt: Buffer, params: ScryptParameters): Promise<Buffer> {
  const N = 2 ** params.logN;
  // scrypt needs 128 * N * r bytes; Node's default ceiling (32 MiB) is below that, so allow twice it.
  const options: ScryptOptions = { N, r: params.r, p: params.p, maxmem: 256 * N * params.r };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFC'), salt, params.keyLength, options, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

const b64 = (b: Buffer) => b.toString('base64').replace(/=+$/, '');

/** Hashes a password into the self-describing string form. */
export async function hashPassword(password: string, params: ScryptParameters = SCRYPT_PARAMETERS): Promise<string> {
  const salt = randomBytes(params.saltLength);
  const key = await derive(password, salt, params);
  return `$scrypt$ln=${params.logN},r=${params.r},p=${params.p}$${b64(salt)}$${b64(key)}`;
}

const ENCODED = /^\$scrypt\$ln=(\d{1,2}),r=(\d{1,3}),p=(\d{1,3})\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/;

/** Parameters of a stored hash, or undefined when it is not one of ours. */
export function parsePasswordHash(encoded: string): (ScryptParameters & { salt: Buffer; key: Buffer }) | undefined {
  const m = ENCODED.exec(encoded);
  if (!m) return undefined;
  const salt = Buffer.from(m[4]!, 'base64');
  const key = Buffer.from(m[5]!, 'base64');
  return { logN: Number(m[1]), r: Number(m[2]), p: Number(m[3]), keyLength: key.length, saltLength: salt.length, salt, key };
}

/** Constant-time check of a password against a stored hash. */
export async function verifyPassword(password: string, encoded: string): Promise<boolean> {
  const parsed = parsePasswordHash(encoded);
  if (!parsed || parsed.logN > 20) return false;
  const key = await derive(password, parsed.salt, parsed);
  return key.length === parsed.key.length && timingSafeEqual(key, parsed.key);
}

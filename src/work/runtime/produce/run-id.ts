// Run ids are UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then 74 random bits. Ids created close
// in time sort close together, so a batch of new runs lands on the right edge of the run, trail,
// actor and outbox indexes instead of on a thousand random index pages (fewer pages dirtied and fewer
// full-page images in the WAL per bulk dispatch). The random part keeps ids unguessable enough for
// lookups that are authorised anyway; nothing may read the creation time out of an id.
import { randomFillSync } from 'node:crypto';

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const bytes = new Uint8Array(16);

/** A new UUIDv7 string. */
export function newRunId(): string {
  randomFillSync(bytes, 6, 10);
  let ms = Date.now();
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = 0x70 | (bytes[6]! & 0x0f); // version 7
  bytes[8] = 0x80 | (bytes[8]! & 0x3f); // RFC 9562 variant
  const h = (i: number) => HEX[bytes[i]!]!;
  return `${h(0)}${h(1)}${h(2)}${h(3)}-${h(4)}${h(5)}-${h(6)}${h(7)}-${h(8)}${h(9)}-${h(10)}${h(11)}${h(12)}${h(13)}${h(14)}${h(15)}`;
}

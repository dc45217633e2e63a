// Packing messages into SendMessageBatch calls: at most 10 entries and 256 KiB of payload per call
// (the SQS limits). Pure logic, so it is tested without a queue.

/** Entries per SendMessageBatch call (SQS limit). */
export const MAX_BATCH_ENTRIES = 10;
/** Total payload bytes per SendMessageBatch call, and per message (SQS limit: 256 KiB). */
export const MAX_BATCH_BYTES = 262_144;

export interface BatchLimits {
  /** Default 10. */
  maxEntries?: number;
  /** Default 262144 (256 KiB). */
  maxBytes?: number;
}

export interface PackedBatches<T> {
  /** Each inner array fits one call; input order is kept within and across batches. */
  batches: T[][];
  /** Items that alone exceed maxBytes: they can never be sent and are left to the caller. */
  oversized: T[];
}

/** UTF-8 size of a message body, which is what SQS counts. */
export function bodyBytes(body: string): number {
  return Buffer.byteLength(body, 'utf8');
}

/**
 * Greedy packing in input order: a batch is closed when the next item would exceed either limit.
 * Order is kept so the oldest pending rows go out first.
 */
export function packBatches<T>(items: readonly T[], sizeOf: (item: T) => number, limits: BatchLimits = {}): PackedBatches<T> {
  const maxEntries = limits.maxEntries ?? MAX_BATCH_ENTRIES;
  const maxBytes = limits.maxBytes ?? MAX_BATCH_BYTES;
  if (maxEntries < 1 || maxBytes < 1) throw new RangeError('batch limits must be positive');
  const batches: T[][] = [];
  const oversized: T[] = [];
  let current: T[] = [];
  let currentBytes = 0;
  for (const item of items) {
    const size = sizeOf(item);
    if (size > maxBytes) {
      oversized.push(item);
      continue;
    }
    if (current.length === maxEntries || currentBytes + size > maxBytes) {
      batches.push(current);
      current = [];
      currentBytes = 0;
    }
    current.push(item);
    currentBytes += size;
  }
  if (current.length > 0) batches.push(current);
  return { batches, oversized };
}

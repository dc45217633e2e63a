// The relay's counters: what one pass sent and failed to send.
import { relaySendFailures, relaySent } from './metrics.ts';

export function recordRelayPass(result: { sent: number; failed: number }): void {
  if (result.sent > 0) relaySent.inc(result.sent);
  if (result.failed > 0) relaySendFailures.inc(result.failed);
}

// The relay's counters: what one pass sent and failed to send. A process that relays exports the
// relay's metrics from its first pass on (exportRelayMetrics); one that does not, never.
import { exportRelayMetrics, relaySendFailures, relaySent } from './metrics.ts';

export function recordRelayPass(result: { sent: number; failed: number }): void {
  exportRelayMetrics();
  if (result.sent > 0) relaySent.inc(result.sent);
  if (result.failed > 0) relaySendFailures.inc(result.failed);
}

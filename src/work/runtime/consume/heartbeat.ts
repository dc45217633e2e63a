// Keeps a message invisible while it is processed: every `intervalMs` the visibility is extended.
// Ours rather than sqs-consumer's `heartbeatInterval` because the final visibility change (backoff,
// release) must not race a heartbeat still in flight: `stop()` waits for it before returning.
// An extension is sent only while `shouldExtend` says the delivery deserves it (its handler runs, or
// its stages are within their deadline, in a healthy process): a delivery stuck on a wait that never
// ends must not keep its message invisible for ever, or nothing would ever run it again.

export interface Heartbeat {
  /** Stops the timer and waits for an extension already sent. */
  stop(): Promise<void>;
}

export function startHeartbeat(options: {
  intervalMs: number;
  extend: () => Promise<void>;
  onError?: (error: unknown) => void;
  /** Asked before each extension; false skips it. Default: always extend. */
  shouldExtend?: () => boolean;
}): Heartbeat {
  let inFlight: Promise<void> = Promise.resolve();
  let stopped = false;
  const timer = setInterval(() => {
    if (stopped || (options.shouldExtend && !options.shouldExtend())) return;
    inFlight = options.extend().catch((error: unknown) => options.onError?.(error));
  }, options.intervalMs);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await inFlight;
    },
  };
}

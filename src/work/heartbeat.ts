// Keeps a message invisible while it is processed: every `intervalMs` the visibility is extended.
// Ours rather than sqs-consumer's `heartbeatInterval` because the final visibility change (backoff,
// release) must not race a heartbeat still in flight: `stop()` waits for it before returning.

export interface Heartbeat {
  /** Stops the timer and waits for an extension already sent. */
  stop(): Promise<void>;
}

export function startHeartbeat(options: {
  intervalMs: number;
  extend: () => Promise<void>;
  onError?: (error: unknown) => void;
}): Heartbeat {
  let inFlight: Promise<void> = Promise.resolve();
  let stopped = false;
  const timer = setInterval(() => {
    if (stopped) return;
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

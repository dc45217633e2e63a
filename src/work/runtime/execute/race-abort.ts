// A handler that ignores its signal keeps running after a timeout, a release or a cancel: the runtime
// stops waiting for it at once and settles, and the handler's later result or rejection is dropped.

/**
 * Settles when `promise` does, or rejects with the signal's reason when it is aborted first. A late
 * rejection of `promise` after the abort is observed here, so it never becomes an unhandled rejection.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  promise.catch(() => {});
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (v) => {
        signal.removeEventListener('abort', onAbort);
        resolve(v);
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(e);
      },
    );
  });
}

// How a long-running executable (api, workers) learns it must stop: the first SIGTERM (orchestrator)
// or SIGINT (Ctrl-C). Both listeners go away once one fires, so a second signal gets Node's default
// handling and kills a process whose shutdown hangs.

/** Resolves on the first SIGTERM or SIGINT. */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(signal);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}

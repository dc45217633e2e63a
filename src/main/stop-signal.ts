// How a long-running executable (api, workers, console) learns it must stop: the first SIGTERM
// (orchestrator) or SIGINT (Ctrl-C). Both listeners go away once one fires, so a second signal gets
// Node's default handling and kills a process whose shutdown hangs.
//
// A signal can also arrive before the command's module has even loaded (seconds on a loaded machine:
// the SQS SDK, postgres.js, Fastify, the units); without a listener its default action would kill the
// process mid-boot. The CLI therefore holds such signals from its first line (holdStopSignals), and
// stopSignal() answers with a held one at once.

let held: NodeJS.Signals | undefined;
const hold = (signal: NodeJS.Signals) => {
  held ??= signal;
};

/** Keeps the first SIGTERM or SIGINT until stopSignal() is asked for (the CLI, before loading a long-running command). */
export function holdStopSignals(): void {
  process.on('SIGTERM', hold);
  process.on('SIGINT', hold);
}

/** Resolves on the first SIGTERM or SIGINT, at once when one was held while the command loaded. */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      resolve(signal);
    };
    // The new listeners go on before the holding ones come off: no instant without a listener.
    if (held === undefined) {
      process.on('SIGTERM', onSignal);
      process.on('SIGINT', onSignal);
    }
    process.off('SIGTERM', hold);
    process.off('SIGINT', hold);
    if (held !== undefined) resolve(held);
  });
}

// Sees every command an SQS client sends, as it leaves the caller: the delivery path's calls skip the
// SDK's middleware stack (src/queue/direct-calls.ts), so tests observe the client's send instead.
import type { SQSClient } from '@aws-sdk/client-sqs';

/** Calls `see` with the class name and input of every command `sqs` sends from now on. */
export function observeCommands(sqs: SQSClient, see: (command: string, input: Record<string, unknown>) => void): void {
  const send = sqs.send.bind(sqs) as (...args: unknown[]) => unknown;
  (sqs as unknown as { send: unknown }).send = (command: { constructor: { name: string }; input: Record<string, unknown> }, ...rest: unknown[]) => {
    see(command.constructor.name, command.input);
    return send(command, ...rest);
  };
}

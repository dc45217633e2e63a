// `svc queues provision`: creates the four work queues and their dead-letter queues on the SQS the
// SVC_SQS_* variables name (cloud SQS, or a local server), with the visibility timeouts, the redrive
// policy and the retention the runtime relies on; brings existing queues to that shape. Run it once per
// environment before the workers start, and again after an upgrade (it is idempotent).
import { withDevStackFallback } from '../config/dev-stack.ts';
import { queuesConfig } from '../config/queues.ts';
import { createSqsClient } from '../queue/client.ts';
import { DLQ_RETENTION_SECONDS, provisionQueues, QUEUE_RETENTION_SECONDS } from '../queue/provision.ts';
import { printText } from './terminal-text.ts';
import { table } from './runs.ts';

const USAGE = `usage:
  svc queues provision   create (or update) every queue and its dead-letter queue from SVC_SQS_* and SVC_VISIBILITY_*_S`;

export async function run(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'provision' || rest.length > 0) {
    const help = !sub || sub === '--help' || sub === '-h' || sub === 'help';
    (help ? console.log : console.error)(help ? USAGE : `svc queues: unknown arguments '${args.join(' ').slice(0, 64)}'\n${USAGE}`);
    return help && sub ? 0 : help ? 1 : 2;
  }
  // Under npm start, the running stack's queues when no SVC_SQS_* is set (src/config/dev-stack.ts).
  const config = queuesConfig(withDevStackFallback(process.env, (line) => console.error(`svc: note: ${line}`)));
  const client = createSqsClient({ region: config.SVC_SQS_REGION, endpoint: config.SVC_SQS_ENDPOINT, localCredentials: config.SVC_SQS_LOCAL_CREDENTIALS });
  try {
    const queues = await provisionQueues(client, config.SVC_SQS_QUEUE_URL_PREFIX, config.visibilitySeconds);
    const days = (s: number) => `${s / 86_400} d`;
    printText(
      table(
        ['QUEUE', 'VISIBILITY', 'RETENTION', 'URL', 'DEAD-LETTER RETENTION', 'DEAD-LETTER URL'],
        queues.map((q) => [q.name, `${config.visibilitySeconds[q.name]} s`, days(QUEUE_RETENTION_SECONDS), q.url, days(DLQ_RETENTION_SECONDS), q.dlqUrl]),
      ),
    );
    return 0;
  } finally {
    client.destroy();
  }
}

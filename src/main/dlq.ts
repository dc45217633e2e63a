// `svc dlq list | redrive --queue <q>`: the dead-letter queue of one queue, read with the SQS API
// (cloud SQS with the same SVC_SQS_* variables as the workers). A thin layer over
// src/work/operate/dead-letter-queue.ts; bad input is one line and exit code 1, nothing touched.
import { signalOutbox } from '../kv/wake.ts';
import { dlqUrl, isQueueName, QUEUE_NAMES } from '../queue/names.ts';
import { listDeadLetters, redriveDeadLetters, type DeadLetter } from '../work/operate/dead-letter-queue.ts';
import { checkOperatorLabel, OperateError } from '../work/operate/operate-error.ts';
import { loadKeySource, openOperateConnections } from './operate-connections.ts';
import { parse, table } from './runs.ts';
import { printJson, printLine, printText } from './terminal-text.ts';

const USAGE = `usage:
  svc dlq list --queue <q> [--max <n>] [--json]
  svc dlq redrive --queue <q> --by <label> [--unit <name>] [--error-code <code>] [--max <n>] [--dry-run] [--json]`;

function lettersTable(letters: Array<DeadLetter & { action?: string; newRunId?: string; reason?: string }>, withAction: boolean): string {
  const age = (s: number | null) => (s === null ? '-' : s < 120 ? `${s}s` : s < 7200 ? `${Math.round(s / 60)}m` : s < 172_800 ? `${Math.round(s / 3600)}h` : `${Math.round(s / 86400)}d`);
  return table(
    [...(withAction ? ['ACTION'] : []), 'UNIT', 'RUN', 'RUN STATUS', 'ERROR', 'RECEIVES', 'AGE', ...(withAction ? ['NOTE'] : ['MESSAGE'])],
    letters.map((l) => [
      ...(withAction ? [l.action ?? ''] : []),
      l.unit ?? '-',
      l.runId ?? '-',
      l.runStatus ?? 'missing',
      l.errorCode ?? '-',
      l.receiveCount === null ? '-' : String(l.receiveCount),
      age(l.ageSeconds),
      withAction ? (l.newRunId ? `new run ${l.newRunId}` : (l.reason ?? '')) : l.messageId,
    ]),
  );
}

export async function run(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (!sub || sub === '--help' || sub === '-h' || sub === 'help') {
    printText(USAGE);
    return sub ? 0 : 1;
  }
  if (sub !== 'list' && sub !== 'redrive') throw new OperateError('RUN_FILTER_INVALID', `unknown subcommand 'dlq ${sub.slice(0, 32)}': use list or redrive (svc dlq --help)`);
  const text = { type: 'string' } as const;
  const { values, positionals } = parse(rest, {
    queue: text, max: text, json: { type: 'boolean' }, ...(sub === 'redrive' ? { by: text, unit: text, 'error-code': text, 'dry-run': { type: 'boolean' } } : {}),
  });
  if (positionals.length) throw new OperateError('RUN_FILTER_INVALID', `dlq ${sub} takes no positional argument, got '${positionals[0]!.slice(0, 64)}'`);
  const queue = values.queue as string | undefined;
  if (!queue || !isQueueName(queue)) throw new OperateError('RUN_FILTER_INVALID', `--queue must be one of ${QUEUE_NAMES.join(', ')}${queue ? `, got '${queue.slice(0, 64)}'` : ''}`);
  let max: number | undefined;
  if (values.max !== undefined) {
    if (!/^\d{1,7}$/.test(values.max as string) || Number(values.max) < 1) throw new OperateError('RUN_FILTER_INVALID', `--max must be a whole number of at least 1, got '${String(values.max).slice(0, 64)}'`);
    max = Number(values.max);
  }
  const by = sub === 'redrive' ? checkOperatorLabel(values.by as string | undefined) : '';
  const unit = values.unit as string | undefined;
  if (unit !== undefined && !/^[a-z][a-z0-9._-]{1,63}$/.test(unit)) throw new OperateError('RUN_FILTER_INVALID', `--unit must be a unit name such as billing.send_invoice, got '${unit.slice(0, 64)}'`);
  const errorCode = values['error-code'] as string | undefined;
  if (errorCode !== undefined && !/^[A-Za-z0-9_.:-]{1,128}$/.test(errorCode)) throw new OperateError('RUN_FILTER_INVALID', `--error-code must be an error code such as VALIDATION_FAILED, got '${errorCode.slice(0, 64)}'`);

  const c = await openOperateConnections('svc dlq', { sqs: true });
  const target = { sqs: c.sqs!.client, dlqUrl: dlqUrl(c.sqs!.queueUrlPrefix, queue) };
  try {
    if (sub === 'list') {
      const letters = await listDeadLetters(c.sql, target, max !== undefined ? { max } : {});
      if (values.json) for (const l of letters) printJson(l);
      else printText(letters.length ? lettersTable(letters, false) : `the dead-letter queue of ${queue} is empty`);
      return 0;
    }
    const keySource = await loadKeySource();
    const report = await redriveDeadLetters(c.sql, target, {
      by,
      ...(keySource ? { keySource } : {}),
      dryRun: Boolean(values['dry-run']),
      ...(unit ? { unit } : {}),
      ...(errorCode ? { errorCode } : {}),
      ...(max !== undefined ? { max } : {}),
    });
    if (report.outcomes.some((o) => o.action === 'redriven')) await signalOutbox(c.redis);
    if (values.json) {
      for (const o of report.outcomes) printJson({ dryRun: report.dryRun, action: o.action, ...o.letter, newRunId: o.newRunId ?? null, reason: o.reason ?? null });
    } else {
      if (report.outcomes.length) printText(lettersTable(report.outcomes.map((o) => ({ ...o.letter, action: o.action, ...(o.newRunId ? { newRunId: o.newRunId } : {}), ...(o.reason ? { reason: o.reason } : {}) })), true));
      const count = (a: string) => report.outcomes.filter((o) => o.action === a).length;
      printLine(
        report.dryRun
          ? `dry run: ${count('would_redrive')} run(s) would be redriven, ${count('would_delete')} message(s) of already redriven runs deleted, ${count('left')} left in place, ${report.unmatched} not matching; nothing written`
          : `${count('redriven')} run(s) redriven, ${count('already_redriven')} message(s) of already redriven runs deleted, ${count('left')} left in place, ${report.unmatched} not matching`,
      );
    }
    return 0;
  } finally {
    await c.close();
  }
}

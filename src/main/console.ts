// `svc console`: the operator console executable (SVC_CONSOLE_HOST:SVC_CONSOLE_PORT, loopback by
// default). It reads every tenant's runs, so it is never part of the public API and refuses a
// non-loopback host without SVC_CONSOLE_TOKEN. Database, Redis and SQS come from the same variables
// as `svc runs` / `svc dlq`.
import { parseEnv } from '../config/parse.ts';
import { checkConsoleAccess, consoleGate } from '../console/console-access.ts';
import { consoleSchema } from '../console/console-config.ts';
import { buildConsole } from '../console/console-server.ts';
import { createLogger } from '../logging/logger.ts';
import { overdueConfig } from '../config/workers.ts';
import { loadKeySource, loadUnitTimeouts, openOperateConnections } from './operate-connections.ts';
import { stopSignal } from './stop-signal.ts';

export async function run(args: string[]): Promise<number> {
  if (args.length > 0) {
    console.error('usage: svc console   (SVC_CONSOLE_HOST, SVC_CONSOLE_PORT, SVC_CONSOLE_TOKEN, DATABASE_URL, SVC_SQS_*; see the README)');
    return 2;
  }
  const stopping = stopSignal();
  const config = parseEnv('svc console', consoleSchema, process.env);
  // Refuses before opening anything: a non-loopback host without a token. The token is never printed.
  checkConsoleAccess(config.SVC_CONSOLE_HOST, config.SVC_CONSOLE_TOKEN);
  const logger = createLogger({ level: config.LOG_LEVEL, base: { service: 'console' } });
  const withSqs = Boolean(process.env.SVC_SQS_ENDPOINT || process.env.SVC_SQS_QUEUE_URL_PREFIX);
  const c = await openOperateConnections('svc console', { sqs: withSqs });
  try {
    const gate = consoleGate({
      token: config.SVC_CONSOLE_TOKEN,
      host: config.SVC_CONSOLE_HOST,
      port: config.SVC_CONSOLE_PORT,
      extraOrigins: config.SVC_CONSOLE_ORIGINS,
    });
    // Only a writable console redrives, so only it needs the units' business keys.
    const keySource = gate.writable ? await loadKeySource() : undefined;
    // The stuck runs page judges as the rescuer does: visibility per queue and margin from the same
    // variables, unit timeouts from the build's units.
    const { visibilitySeconds, marginMs } = overdueConfig(process.env);
    const stuckWindows = { visibilitySeconds, marginMs, unitTimeoutSeconds: await loadUnitTimeouts() };
    const app = await buildConsole({
      sql: c.sql,
      stuckWindows,
      redis: c.redis,
      sqs: c.sqs,
      gate,
      operator: config.SVC_CONSOLE_OPERATOR,
      keySource,
      sessionTtlSeconds: config.SVC_CONSOLE_SESSION_TTL_SECONDS,
      loginMaxFailures: config.SVC_CONSOLE_LOGIN_MAX_FAILURES,
      loginWindowSeconds: config.SVC_CONSOLE_LOGIN_WINDOW_SECONDS,
      logger,
    });
    try {
      await app.listen({ host: config.SVC_CONSOLE_HOST, port: config.SVC_CONSOLE_PORT });
      logger.info(
        { host: config.SVC_CONSOLE_HOST, port: config.SVC_CONSOLE_PORT, writable: gate.writable, queueDepths: withSqs, sessionTtlSeconds: config.SVC_CONSOLE_SESSION_TTL_SECONDS },
        'console listening',
      );
      await stopping;
    } finally {
      await app.close();
    }
  } finally {
    await c.close();
  }
  return 0;
}

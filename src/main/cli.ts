#!/usr/bin/env node
// `svc`: the one command line of the service. npm scripts mirror its subcommands; the images run it.
// Each subcommand lives in its own module under src/main/ exporting `run(args): Promise<number>`,
// imported lazily so `svc migrator status` never loads Fastify or the SQS client.
import { withoutUrlCredentials } from '../logging/url-credentials.ts';
import { holdStopSignals } from './stop-signal.ts';
import { terminalText } from './terminal-text.ts';

type Command = { run(args: string[]): Promise<number> };

const commands: Record<string, { load: () => Promise<Command>; help: string }> = {
  api: { load: () => import('./api.ts'), help: 'start the HTTP API (port 3000)' },
  workers: { load: () => import('./workers.ts'), help: 'start the queue workers (QUEUES), relay with SVC_RELAY=true' },
  migrator: { load: () => import('./migrator.ts'), help: 'deploy | apply | status | db-seed [--class DevSeeder]' },
  migrations: { load: () => import('./migrations.ts'), help: 'create <name> [--custom] | check | pin' },
  permissions: { load: () => import('./permissions.ts'), help: 'emit: write dist/permissions.json' },
  tasks: { load: () => import('./tasks.ts'), help: 'check | emit: discover units, write dist/tasks.json' },
  openapi: { load: () => import('./openapi.ts'), help: 'emit: write dist/openapi.json' },
  schedule: { load: () => import('./schedule.ts'), help: 'fire <schedule-name> [--at <iso instant>]' },
  runs: { load: () => import('./runs.ts'), help: 'list | show <runId> | redrive <runId>|--status failed … | cancel <runId> --by <label>' },
  queues: { load: () => import('./queues.ts'), help: 'provision: create (or update) every queue and its dead-letter queue on SQS' },
  dlq: { load: () => import('./dlq.ts'), help: 'list --queue <q> | redrive --queue <q> --by <label>: read a dead-letter queue, redrive its runs' },
  emit: { load: () => import('./emit.ts'), help: 'write every build artifact into dist/' },
  console: { load: () => import('./console.ts'), help: 'serve the operator console (SVC_CONSOLE_HOST:SVC_CONSOLE_PORT, default 127.0.0.1:3001)' },
  dev: { load: () => import('./dev.ts'), help: 'run the whole service locally on embedded defaults (npm start)' },
};

/** The commands that run until SIGTERM/SIGINT (they ask stopSignal() first thing). */
const LONG_RUNNING = new Set(['api', 'workers', 'console']);

function usage(): string {
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(12)} ${c.help}`);
  return `usage: svc <command> [args]\n\ncommands:\n${lines.join('\n')}`;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === '--help' || name === '-h' || name === 'help') {
    console.log(usage());
    return name ? 0 : 2;
  }
  const command = commands[name];
  if (!command) {
    console.error(`svc: unknown command '${name}'\n${usage()}`);
    return 2;
  }
  // A stop that arrives while a long-running command still loads is kept for it (src/main/stop-signal.ts).
  if (LONG_RUNNING.has(name)) holdStopSignals();
  return (await command.load()).run(args);
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    // One line for the operator: stable code plus message (a configuration error lists its problems on
    // lines of their own; a message may quote a run or queue field, whose control characters are
    // escaped). Stack traces only with LOG_LEVEL=debug.
    const e = error as { code?: string; message?: string; stack?: string };
    console.error(withoutUrlCredentials(terminalText(`svc: ${e.code ? `${e.code}: ` : ''}${e.message ?? String(error)}`, { keepNewlines: true })));
    if (process.env.LOG_LEVEL === 'debug' && e.stack) console.error(withoutUrlCredentials(terminalText(e.stack, { keepNewlines: true })));
    process.exitCode = 1;
  },
);

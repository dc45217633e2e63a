// `npm run bench -- sqs-ceiling [--smoke] [--messages N] [--loops N]`: the raw ceiling of the SQS hop
// alone on this machine, with no database and no Redis. The SQS-protocol server (fauxqs) runs in this
// process exactly as in `bench work`/`bench peers`; the client runs in a child process (as ours' relay
// and workers do), so the server and the client do not share one thread.
//
// Phases, each timed on its own: (1) send N messages with SendMessageBatch (10 per call, 4 calls in
// flight, like the relay); (2) drain them with L loops of ReceiveMessage (10) + DeleteMessageBatch, the
// best a consumer can do; (3) both at once (send while draining). Every body is counted (lost and
// duplicated are reported). Drain times end at the last delete. CPU per message is reported for the
// server process and the client (CPU includes the final empty long polls).
// Last line: SQS_CEILING send_per_s=<n> drain_per_s=<n> both_per_s=<n> server_cpu_ms_per_msg=<x> client_cpu_ms_per_msg=<x>
import { spawn } from 'node:child_process';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  CreateQueueCommand,
  DeleteMessageBatchCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import { createSqsClient } from '../src/queue/client.ts';
import { num } from './peers/stats.ts';

const SELF = fileURLToPath(import.meta.url);
const nowMs = () => performance.now();
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

interface PhaseResult {
  phase: string;
  messages: number;
  perS: number;
  clientCpuMs: number;
  lost: number;
  duplicated: number;
}

async function sendAll(sqs: SQSClient, url: string, from: number, n: number): Promise<void> {
  const calls: Array<() => Promise<unknown>> = [];
  for (let i = from; i < from + n; i += 10) {
    const entries: Array<{ Id: string; MessageBody: string }> = [];
    for (let s = i; s < Math.min(from + n, i + 10); s++) entries.push({ Id: String(s - i), MessageBody: String(s) });
    calls.push(() => sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: entries })));
  }
  for (let i = 0; i < calls.length; i += 4) await Promise.all(calls.slice(i, i + 4).map((c) => c()));
}

/** Resolves with the instant of the last delete (loops still in a long poll then end up to 1 s later). */
async function drain(sqs: SQSClient, url: string, seen: Uint32Array, expected: number, loops: number, sending: () => boolean): Promise<number> {
  let received = 0;
  let lastDelete = nowMs();
  const deadline = nowMs() + 300_000;
  const loop = async () => {
    while (nowMs() < deadline && (sending() || received < expected)) {
      const out = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      const messages = out.Messages ?? [];
      if (messages.length === 0) continue;
      received += messages.length;
      for (const m of messages) {
        const s = Number(m.Body);
        if (Number.isInteger(s) && s >= 0 && s < seen.length) seen[s] = (seen[s] as number) + 1;
      }
      await sqs.send(new DeleteMessageBatchCommand({ QueueUrl: url, Entries: messages.map((m, k) => ({ Id: String(k), ReceiptHandle: m.ReceiptHandle! })) }));
      lastDelete = nowMs();
    }
  };
  await Promise.all(Array.from({ length: loops }, loop));
  return lastDelete;
}

function verdict(seen: Uint32Array, from: number, n: number): { lost: number; duplicated: number } {
  let lost = 0;
  let duplicated = 0;
  for (let s = from; s < from + n; s++) {
    const c = seen[s] as number;
    if (c === 0) lost += 1;
    if (c > 1) duplicated += c - 1;
  }
  return { lost, duplicated };
}

/** The child: runs the three phases against the server and prints one JSON line per phase. */
async function client(): Promise<void> {
  const n = Number(process.env.CEILING_MESSAGES);
  const loops = Number(process.env.CEILING_LOOPS);
  const sqs = createSqsClient({ region: 'us-east-1', endpoint: process.env.CEILING_ENDPOINT!, localCredentials: true });
  const url = (await sqs.send(new CreateQueueCommand({ QueueName: `ceiling-${process.pid}` }))).QueueUrl!;
  const seen = new Uint32Array(2 * n);
  const report = (r: PhaseResult) => process.stdout.write(`${JSON.stringify(r)}\n`);
  const phase = async (name: string, messages: number, from: number, work: () => Promise<number | void>) => {
    process.stdout.write(`BEGIN ${name}\n`);
    const c0 = cpuMs();
    const t0 = nowMs();
    const end = await work();
    const ms = (typeof end === 'number' ? end : nowMs()) - t0;
    const v = name === 'send' ? { lost: 0, duplicated: 0 } : verdict(seen, from, messages);
    report({ phase: name, messages, perS: (messages * 1000) / ms, clientCpuMs: cpuMs() - c0, ...v });
  };
  // Warm-up (JIT, connections), not reported.
  await sendAll(sqs, url, 0, 200);
  await drain(sqs, url, new Uint32Array(2 * n), 200, loops, () => false);
  await phase('send', n, 0, () => sendAll(sqs, url, 0, n));
  await phase('drain', n, 0, () => drain(sqs, url, seen, n, loops, () => false));
  let sending = true;
  await phase('both', n, n, async () => {
    const draining = drain(sqs, url, seen, n, loops, () => sending);
    await sendAll(sqs, url, n, n);
    sending = false;
    return draining;
  });
  sqs.destroy();
}

export async function main(args: string[]): Promise<number> {
  const smoke = args.includes('--smoke');
  const opt = (flag: string, fallback: number) => {
    const i = args.indexOf(flag);
    const v = i >= 0 ? Number(args[i + 1]) : fallback;
    return v > 0 ? v : fallback;
  };
  const messages = opt('--messages', smoke ? 500 : 20_000);
  const loops = opt('--loops', 10);
  const { startLocalSqsServer } = await import('../src/queue/local-sqs-server.ts');
  const server = await startLocalSqsServer();
  const results: Array<PhaseResult & { serverCpuMs: number }> = [];
  try {
    const child = spawn(process.execPath, [SELF], {
      env: { ...process.env, CEILING_ROLE: 'client', CEILING_ENDPOINT: server.endpoint, CEILING_MESSAGES: String(messages), CEILING_LOOPS: String(loops) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const exited = new Promise<number>((resolve) => child.once('exit', (code) => resolve(code ?? 1)));
    let serverCpu0 = cpuMs();
    for await (const line of readline.createInterface({ input: child.stdout })) {
      if (line.startsWith('BEGIN ')) {
        serverCpu0 = cpuMs();
        continue;
      }
      const r = JSON.parse(line) as PhaseResult;
      const row = { ...r, serverCpuMs: cpuMs() - serverCpu0 };
      results.push(row);
      console.log(
        `CEILING phase=${r.phase} messages=${r.messages} messages_per_s=${num(r.perS)} server_cpu_ms_per_msg=${(row.serverCpuMs / r.messages).toFixed(3)} ` +
          `client_cpu_ms_per_msg=${(r.clientCpuMs / r.messages).toFixed(3)} lost=${r.lost} duplicated=${r.duplicated}`,
      );
    }
    if ((await exited) !== 0) throw new Error('the ceiling client failed');
  } finally {
    await server.stop();
  }
  const by = (p: string) => results.find((r) => r.phase === p);
  const both = by('both');
  const problems = results.reduce((n, r) => n + r.lost + r.duplicated, 0);
  console.log(
    `SQS_CEILING send_per_s=${num(by('send')?.perS ?? Number.NaN)} drain_per_s=${num(by('drain')?.perS ?? Number.NaN)} both_per_s=${num(both?.perS ?? Number.NaN)} ` +
      `server_cpu_ms_per_msg=${both ? (both.serverCpuMs / both.messages).toFixed(3) : 'nan'} client_cpu_ms_per_msg=${both ? (both.clientCpuMs / both.messages).toFixed(3) : 'nan'}`,
  );
  return problems > 0 ? 1 : 0;
}

if (process.env.CEILING_ROLE === 'client') {
  client().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
